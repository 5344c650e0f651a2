# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_pfprof_global_optspecs
    string join \n h/help V/version
end

function __fish_pfprof_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_pfprof_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_pfprof_using_subcommand
    set -l cmd (__fish_pfprof_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c pfprof -n "__fish_pfprof_needs_command" -s h -l help -d 'Print help'
complete -c pfprof -n "__fish_pfprof_needs_command" -s V -l version -d 'Print version'
complete -c pfprof -n "__fish_pfprof_needs_command" -f -a "record" -d 'Run a command under the profiler and write pfprof.data, reports and flame graphs'
complete -c pfprof -n "__fish_pfprof_needs_command" -f -a "report" -d 'Print the report of a recording'
complete -c pfprof -n "__fish_pfprof_needs_command" -f -a "flamegraph" -d 'Write folded stacks and SVG flame graphs of a recording'
complete -c pfprof -n "__fish_pfprof_needs_command" -f -a "diff" -d 'Compare two recordings per object, section and class, and write a differential flame graph'
complete -c pfprof -n "__fish_pfprof_needs_command" -f -a "top" -d 'Live view: which processes, files and code take page faults now (system-wide, or -p PID), refreshed every second'
complete -c pfprof -n "__fish_pfprof_needs_command" -f -a "archive" -d 'Copy the binaries a recording names into its directory (DIR/.build-id), so that the directory, copied elsewhere, reports the same names without them'
complete -c pfprof -n "__fish_pfprof_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -s o -l output -d 'Output directory (an existing one is moved to <DIR>.old)' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l period -d 'Record one fault in N (1 = every fault)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l mmap-pages -d 'Data pages (4 KiB) per CPU ring buffer (the BPF collector\'s rings are shared by up to four CPUs and hold their shares), 1..=262144, rounded up to a power of two; mapped as asked or refused. Default: 4096 (16 MiB); with `--call-graph dwarf`, 32 MiB through the BPF collector, else 256 MiB per CPU within 2 GiB in all and 1/16 of the available memory, at least 16 MiB (every perf sample reserves its stack copy until pfprof unwinds it); shrunk with a warning when the locked-memory limits do not allow it' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l call-graph -d 'How user call chains are collected: `dwarf[,STACK_BYTES]` copies STACK_BYTES (default 32768) of user stack per fault and unwinds it with the CFI while recording (complete stacks through code built without frame pointers); `fp` lets the kernel walk frame pointers (cheaper, loses callers of code without them); `none` records no user stacks' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l stream -d 'Print one line per fault while recording (`--stream=site` adds the code site)' -r -f -a "fault\t'Class, address, target, latency'
site\t'The same, plus the code site'"
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l top -d 'Rows of each table in the report printed and in report.txt (report.json holds every row)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l max-lost -d 'Exit with status 3 (after writing every output) if more than PCT percent of the faults were lost: those the kernel counted for the sampled classes (divided by --period) but the recording does not hold' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l until-ms -d 'End the start-up window N ms after exec instead of when `main` is entered (`diff`: with --startup; `flamegraph`: for startup.svg, so not with --class)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l startup-of -d 'Show the start-up window of this program in full (its path, file name or pid; by default the window with the most start-up faults), and only its faults in startup.svg (every window\'s otherwise)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l symfs -d 'Read the recorded binaries under DIR first (DIR/usr/lib/libc.so.6 for /usr/lib/libc.so.6), as perf\'s --symfs: another machine\'s files. A binary is used only if its build-id is the recorded one; perf\'s build-id cache (~/.debug) and /usr/lib/debug/.build-id are searched too' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l buildid-dir -d 'The build-id cache (perf\'s layout, DIR/.build-id/xx/yyyy/elf) that `record` fills with the binaries it saw run and every command reads names from. Default: ~/.debug, as perf' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -s p -l pid -d 'Attach to running processes (comma-separated pids) instead of starting a command' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l class -d 'Sample only these faults (the others are still counted): `major` keeps the overhead low on a busy host' -r -f -a "major\t'Major faults only: cheap enough for a busy host; no tracepoints, so no latency or access type'
minor\t'Minor faults (COW included) only'
cow\t'What COW needs: minor faults and the fault-entry tracepoints'
all\t'Everything'"
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l duration -d 'Stop after this many seconds (attach and system-wide; a command gets SIGTERM)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l interval -d 'With -a or -p: run until stopped, writing one profile per interval of SECS (at least 1) into a subdirectory of -o DIR named by its start (UTC): profile.pb.gz, the folded stacks per class, report.json and report.txt. Records are aggregated as they arrive; no recording is kept unless --keep-recording' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l keep -d 'With --interval: keep the newest N interval directories, deleting older ones this run wrote' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l buildid-cache-limit -d 'Add no file to the build-id cache once its .build-id holds this many MiB (nothing is deleted from it)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l no-bpf -d 'Record with perf\'s own samples (a fault\'s software event and its tracepoint, and in dwarf mode perf\'s stack copies) instead of pfprof\'s BPF collector, which writes one record per fault with only the stack bytes there are and, in dwarf mode, remembers unwinds'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l no-tracepoints -d 'Record minor/major faults only, without the fault-entry tracepoints (no COW or access types; about half the recording size; refused with `--class cow`)'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l resident -d 'Also record who holds resident memory (resident.svg at the peak, resident-exit.svg at exit; with --interval, each interval\'s resident.folded at its peak and resident-exit.folded at its end): the syscalls that give memory back (munmap, madvise, mremap, brk) and the kernel\'s counts of file pages; with -a, every process\'s pages first touched while it records. Not by default: it costs a fixed 25-40 ms (its programs, one more flame graph: 20-27% of python\'s 0.15 s imports), within 2% on programs that run for seconds (python, gcc), and 20-30% more of pfprof\'s CPU a fault on a busy host (each fault\'s ledger entry); more where the kernel refuses the BPF programs that record these events and the tracepoints\' events are opened'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l fixed-ts -d 'With --stream: a sequence number instead of the time, and no latency, so that two runs of a deterministic program print the same lines'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -s q -l quiet -d 'Do not print the report at the end (warnings about lost faults still are)'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l kernel -d 'Keep kernel frames in stacks (symbolized from /proc/kallsyms): `record --kernel` records them; reading a recording made without it is refused'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -s a -l all-cpus -d 'Record every process on every CPU (system-wide) instead of starting a command'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l run-as-root -d 'Under sudo, run the command as root (by default it runs as the user who invoked sudo, with their groups; pfprof keeps root for the events)'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l keep-recording -d 'With --interval: also keep the whole recording, DIR/pfprof.data (it grows with every fault)'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -l no-buildid-cache -d 'Do not copy the binaries that ran into the build-id cache (perf\'s --no-buildid-cache): a report after they are rebuilt or deleted, or of a process in another mount namespace, then shows addresses'
complete -c pfprof -n "__fish_pfprof_using_subcommand record" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -s i -l input -d 'Recording directory or pfprof.data file' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l format -d 'Output format' -r -f -a "text\t'Human-readable text'
json\t'report.json'"
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l top -d 'Rows of each table in the text report (the JSON holds every row)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l until-ms -d 'End the start-up window N ms after exec instead of when `main` is entered (`diff`: with --startup; `flamegraph`: for startup.svg, so not with --class)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l startup-of -d 'Show the start-up window of this program in full (its path, file name or pid; by default the window with the most start-up faults), and only its faults in startup.svg (every window\'s otherwise)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l symfs -d 'Read the recorded binaries under DIR first (DIR/usr/lib/libc.so.6 for /usr/lib/libc.so.6), as perf\'s --symfs: another machine\'s files. A binary is used only if its build-id is the recorded one; perf\'s build-id cache (~/.debug) and /usr/lib/debug/.build-id are searched too' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l buildid-dir -d 'The build-id cache (perf\'s layout, DIR/.build-id/xx/yyyy/elf) that `record` fills with the binaries it saw run and every command reads names from. Default: ~/.debug, as perf' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l partial -d 'Analyse the intact part of a truncated or damaged recording'
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l startup -d 'Only the start-up analysis (faults from exec until `main`)'
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -l kernel -d 'Keep kernel frames in stacks (symbolized from /proc/kallsyms): `record --kernel` records them; reading a recording made without it is refused'
complete -c pfprof -n "__fish_pfprof_using_subcommand report" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -s i -l input -d 'Recording directory or pfprof.data file' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -s o -l output -d 'Output directory (default: the recording\'s directory)' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -l class -d 'Which class to draw (default: every class and `all`)' -r -f -a "minor\t'Minor faults'
major\t'Major faults'
cow\t'Copy-on-write faults'
all\t'All classes, class as the root frame'"
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -l until-ms -d 'End the start-up window N ms after exec instead of when `main` is entered (`diff`: with --startup; `flamegraph`: for startup.svg, so not with --class)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -l startup-of -d 'Show the start-up window of this program in full (its path, file name or pid; by default the window with the most start-up faults), and only its faults in startup.svg (every window\'s otherwise)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -l symfs -d 'Read the recorded binaries under DIR first (DIR/usr/lib/libc.so.6 for /usr/lib/libc.so.6), as perf\'s --symfs: another machine\'s files. A binary is used only if its build-id is the recorded one; perf\'s build-id cache (~/.debug) and /usr/lib/debug/.build-id are searched too' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -l buildid-dir -d 'The build-id cache (perf\'s layout, DIR/.build-id/xx/yyyy/elf) that `record` fills with the binaries it saw run and every command reads names from. Default: ~/.debug, as perf' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -l partial -d 'Analyse the intact part of a truncated or damaged recording'
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -l kernel -d 'Keep kernel frames in stacks (symbolized from /proc/kallsyms): `record --kernel` records them; reading a recording made without it is refused'
complete -c pfprof -n "__fish_pfprof_using_subcommand flamegraph" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l format -d 'Output format of the comparison' -r -f -a "text\t'Human-readable text'
json\t'report.json'"
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -s o -l output -d 'Where diff.folded and diff.svg go (default: the second recording\'s directory)' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l top -d 'Rows of the text comparison: the N largest changes (the JSON holds every row)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l until-ms -d 'End the start-up window N ms after exec instead of when `main` is entered (`diff`: with --startup; `flamegraph`: for startup.svg, so not with --class)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l startup-of -d 'Show the start-up window of this program in full (its path, file name or pid; by default the window with the most start-up faults), and only its faults in startup.svg (every window\'s otherwise)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l symfs -d 'Read the recorded binaries under DIR first (DIR/usr/lib/libc.so.6 for /usr/lib/libc.so.6), as perf\'s --symfs: another machine\'s files. A binary is used only if its build-id is the recorded one; perf\'s build-id cache (~/.debug) and /usr/lib/debug/.build-id are searched too' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l buildid-dir -d 'The build-id cache (perf\'s layout, DIR/.build-id/xx/yyyy/elf) that `record` fills with the binaries it saw run and every command reads names from. Default: ~/.debug, as perf' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l startup -d 'Compare the start-up windows only'
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l resident -d 'Compare the resident memory at the peak (KiB per object, section and kind; diff.svg by the stack of the fault that made each page present): both recordings made with `record --resident`'
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l normalize -d 'Colour diff.svg by the change of each frame\'s share of its run\'s faults (the first run scaled to the second\'s total), instead of by the change of raw fault counts'
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -l kernel -d 'Keep kernel frames in stacks (symbolized from /proc/kallsyms): `record --kernel` records them; reading a recording made without it is refused'
complete -c pfprof -n "__fish_pfprof_using_subcommand diff" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -s p -l pid -d 'Follow these processes (comma-separated pids) instead of every process; ends when they have all exited' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -s d -l delay -d 'Seconds between refreshes' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -s n -l iterations -d 'Stop after N refreshes' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -l top -d 'Rows of each table in --batch snapshots' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -l call-graph -d 'How user call chains are collected (see `record --call-graph`): the code sites need the innermost frame only, so frame pointers (`fp`), the cheapest, are the default' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -l mmap-pages -d 'Data pages (4 KiB) per CPU ring buffer (see `record --mmap-pages`)' -r
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -s b -l batch -d 'Print a plain-text snapshot per refresh instead of the full-screen view (like `top -b`); the default when stdout is not a terminal'
complete -c pfprof -n "__fish_pfprof_using_subcommand top" -s h -l help -d 'Print help'
complete -c pfprof -n "__fish_pfprof_using_subcommand archive" -l symfs -d 'Read the recorded binaries under DIR first (see `report --symfs`)' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand archive" -l buildid-dir -d 'The build-id cache to copy from (default ~/.debug)' -r -F
complete -c pfprof -n "__fish_pfprof_using_subcommand archive" -s h -l help -d 'Print help'
complete -c pfprof -n "__fish_pfprof_using_subcommand help; and not __fish_seen_subcommand_from record report flamegraph diff top archive help" -f -a "record" -d 'Run a command under the profiler and write pfprof.data, reports and flame graphs'
complete -c pfprof -n "__fish_pfprof_using_subcommand help; and not __fish_seen_subcommand_from record report flamegraph diff top archive help" -f -a "report" -d 'Print the report of a recording'
complete -c pfprof -n "__fish_pfprof_using_subcommand help; and not __fish_seen_subcommand_from record report flamegraph diff top archive help" -f -a "flamegraph" -d 'Write folded stacks and SVG flame graphs of a recording'
complete -c pfprof -n "__fish_pfprof_using_subcommand help; and not __fish_seen_subcommand_from record report flamegraph diff top archive help" -f -a "diff" -d 'Compare two recordings per object, section and class, and write a differential flame graph'
complete -c pfprof -n "__fish_pfprof_using_subcommand help; and not __fish_seen_subcommand_from record report flamegraph diff top archive help" -f -a "top" -d 'Live view: which processes, files and code take page faults now (system-wide, or -p PID), refreshed every second'
complete -c pfprof -n "__fish_pfprof_using_subcommand help; and not __fish_seen_subcommand_from record report flamegraph diff top archive help" -f -a "archive" -d 'Copy the binaries a recording names into its directory (DIR/.build-id), so that the directory, copied elsewhere, reports the same names without them'
complete -c pfprof -n "__fish_pfprof_using_subcommand help; and not __fish_seen_subcommand_from record report flamegraph diff top archive help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
