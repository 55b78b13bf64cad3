# Sourced by the bin/ scripts: make sure the project's virtualenv exists and is current.
# Creates <project>/.venv on first use and (re)installs the package with its test extra
# whenever setup.cfg changes. Honours PYKBROKER_VENV to place the virtualenv elsewhere.
PYKBROKER_HOME="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYKBROKER_VENV="${PYKBROKER_VENV:-$PYKBROKER_HOME/.venv}"
_pyk_python="${PYTHON:-python3}"
if [ ! -x "$PYKBROKER_VENV/bin/python" ]; then
    echo "pykbroker: creating virtualenv in $PYKBROKER_VENV" >&2
    "$_pyk_python" -m venv "$PYKBROKER_VENV" || exit 1
fi
_pyk_stamp="$PYKBROKER_VENV/.pykbroker-installed"
_pyk_want="$(cat "$PYKBROKER_HOME/setup.cfg" "$PYKBROKER_HOME/pyproject.toml" | cksum)"
if [ ! -f "$_pyk_stamp" ] || [ "$(cat "$_pyk_stamp")" != "$_pyk_want" ]; then
    echo "pykbroker: installing the package and its test extra into $PYKBROKER_VENV" >&2
    "$PYKBROKER_VENV/bin/python" -m pip install -q --upgrade pip >&2 || exit 1
    "$PYKBROKER_VENV/bin/python" -m pip install -q -e "$PYKBROKER_HOME[test]" >&2 || exit 1
    echo "$_pyk_want" > "$_pyk_stamp"
fi
PYKBROKER_PY="$PYKBROKER_VENV/bin/python"
export PYTHONPATH="$PYKBROKER_HOME${PYTHONPATH:+:$PYTHONPATH}"
