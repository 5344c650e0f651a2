_pfprof() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="pfprof"
                ;;
            pfprof,archive)
                cmd="pfprof__subcmd__archive"
                ;;
            pfprof,diff)
                cmd="pfprof__subcmd__diff"
                ;;
            pfprof,flamegraph)
                cmd="pfprof__subcmd__flamegraph"
                ;;
            pfprof,help)
                cmd="pfprof__subcmd__help"
                ;;
            pfprof,record)
                cmd="pfprof__subcmd__record"
                ;;
            pfprof,report)
                cmd="pfprof__subcmd__report"
                ;;
            pfprof,top)
                cmd="pfprof__subcmd__top"
                ;;
            pfprof__subcmd__help,archive)
                cmd="pfprof__subcmd__help__subcmd__archive"
                ;;
            pfprof__subcmd__help,diff)
                cmd="pfprof__subcmd__help__subcmd__diff"
                ;;
            pfprof__subcmd__help,flamegraph)
                cmd="pfprof__subcmd__help__subcmd__flamegraph"
                ;;
            pfprof__subcmd__help,help)
                cmd="pfprof__subcmd__help__subcmd__help"
                ;;
            pfprof__subcmd__help,record)
                cmd="pfprof__subcmd__help__subcmd__record"
                ;;
            pfprof__subcmd__help,report)
                cmd="pfprof__subcmd__help__subcmd__report"
                ;;
            pfprof__subcmd__help,top)
                cmd="pfprof__subcmd__help__subcmd__top"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        pfprof)
            opts="-h -V --help --version record report flamegraph diff top archive help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__archive)
            opts="-h --symfs --buildid-dir --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --symfs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --buildid-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__diff)
            opts="-o -h --startup --resident --format --output --top --normalize --kernel --until-ms --startup-of --symfs --buildid-dir --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --until-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --startup-of)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --symfs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --buildid-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__flamegraph)
            opts="-i -o -h --input --output --class --partial --kernel --until-ms --startup-of --symfs --buildid-dir --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --input)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --class)
                    COMPREPLY=($(compgen -W "minor major cow all" -- "${cur}"))
                    return 0
                    ;;
                --until-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --startup-of)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --symfs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --buildid-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help)
            opts="record report flamegraph diff top archive help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help__subcmd__archive)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help__subcmd__diff)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help__subcmd__flamegraph)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help__subcmd__record)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help__subcmd__report)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__help__subcmd__top)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__record)
            opts="-o -q -p -a -h --output --period --mmap-pages --call-graph --no-bpf --no-tracepoints --resident --stream --fixed-ts --quiet --top --max-lost --kernel --until-ms --startup-of --symfs --buildid-dir --pid --all-cpus --class --run-as-root --duration --interval --keep --keep-recording --no-buildid-cache --buildid-cache-limit --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --output)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -o)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --period)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mmap-pages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --call-graph)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --stream)
                    COMPREPLY=($(compgen -W "fault site" -- "${cur}"))
                    return 0
                    ;;
                --top)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-lost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --until-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --startup-of)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --symfs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --buildid-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --pid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --class)
                    COMPREPLY=($(compgen -W "major minor cow all" -- "${cur}"))
                    return 0
                    ;;
                --duration)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --interval)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --keep)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --buildid-cache-limit)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__report)
            opts="-i -h --input --format --partial --startup --top --kernel --until-ms --startup-of --symfs --buildid-dir --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --input)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -i)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --format)
                    COMPREPLY=($(compgen -W "text json" -- "${cur}"))
                    return 0
                    ;;
                --top)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --until-ms)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --startup-of)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --symfs)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --buildid-dir)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        pfprof__subcmd__top)
            opts="-p -d -b -n -h --pid --delay --batch --iterations --top --call-graph --mmap-pages --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --pid)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -p)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --delay)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -d)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --iterations)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --top)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --call-graph)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --mmap-pages)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _pfprof -o nosort -o bashdefault -o default pfprof
else
    complete -F _pfprof -o bashdefault -o default pfprof
fi
