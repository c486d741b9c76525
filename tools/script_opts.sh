# shellcheck shell=bash
# The command line of the tools/ scripts, read by one loop; sourced by them, not run.
#
# opts_parse NAME SPEC... -- ARG...: each SPEC is "--opt=var" (the next argument goes into var)
# or "--opt:var=value" (a flag: var is set to value). -h or --help prints the script's usage, its
# header comment (up to the first line that is not a comment), and exits 0; an argument that no
# SPEC names, or an option without its value, is an error (exit 1) that names the script (NAME).
opts_parse() {
    local _name=$1 _spec _flag _found
    local -a _specs=()
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        _specs+=("$1")
        shift
    done
    [ $# -gt 0 ] && shift
    while [ $# -gt 0 ]; do
        case $1 in
        -h | --help)
            awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"
            exit 0
            ;;
        esac
        _found=0
        for _spec in "${_specs[@]}"; do
            if [[ $_spec == *:* ]]; then
                [ "${_spec%%:*}" = "$1" ] || continue
                _flag=${_spec#*:}
                printf -v "${_flag%%=*}" '%s' "${_flag#*=}"
            else
                [ "${_spec%%=*}" = "$1" ] || continue
                [ $# -ge 2 ] || { echo "$_name: $1 needs a value (see --help)" >&2; exit 1; }
                printf -v "${_spec#*=}" '%s' "$2"
                shift
            fi
            _found=1
            break
        done
        [ "$_found" = 1 ] || { echo "$_name: unknown argument '$1' (see --help)" >&2; exit 1; }
        shift
    done
}
