import Synchronization
import TeamLogStore
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// SIGINT, SIGTERM and SIGHUP in the commands that make directories they remove when done (a replay's
/// scratch store, a backup's copy): the signal still ends the process as it would have (the exit status a
/// shell or supervisor sees is the signal's), but first what the run was making is removed
/// (`Leftovers.removeAll`) and named on stderr. Before, a Ctrl-C of an audit left its scratch store —
/// about 2 GB for a 5M-event store — under `$TMPDIR` for good.
///
/// The handler only writes the signal's number to a pipe; a thread of its own reads it, removes, then
/// restores the default action and raises the signal again. A signal whose action is not the default
/// when this is installed (ignored, or handled by the command itself) is left as it is.
enum Interrupts {
    nonisolated(unsafe) private static var pipeWrite: Int32 = -1
    private static let monitor = Monitor()
    nonisolated(unsafe) private static var installed = false

    /// Set once a signal's cleanup started: the process is about to end by that signal.
    static let stopping = Atomic<Bool>(false)

    /// When a signal's cleanup is under way, waits for it to end the process by the signal, instead of
    /// ending it another way: removing a scratch store while the replay opens it fails the replay, whose
    /// error path exited 2 ("could not run: its scratch store … failed") before the cleanup finished,
    /// leaving its `.removing` directory and a status that was not the signal's (a loaded CI run).
    static func waitIfStopping() {
        guard stopping.load(ordering: .acquiring) else { return }
        while true { pause() }
    }

    static func removeLeftoversOnSignal() {
        let first = monitor.locked {
            defer { installed = true }
            return !installed
        }
        guard first else { return }
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { return }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        pipeWrite = fds[1]
        let readEnd = fds[0]
        guard
            startThread(
                name: "signals",
                {
                    var number: UInt8 = 0
                    while read(readEnd, &number, 1) != 1 {}
                    let signal = Int32(number)
                    stopping.store(true, ordering: .releasing)
                    let removed = Leftovers.removeAll()
                    if !removed.isEmpty {
                        // After a progress line a terminal still shows: a line of its own.
                        let newline = isatty(2) != 0 ? "\n" : ""
                        printErr("\(newline)teamlog: \(name(of: signal)): removed \(removed.joined(separator: ", "))")
                    }
                    endBySignal(signal)
                }) != nil
        else { return }
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            var current = sigaction()
            guard sigaction(signal, nil, &current) == 0, current.__sigaction_handler.sa_handler == nil else { continue }
            var action = sigaction()
            sigemptyset(&action.sa_mask)
            action.sa_flags = SA_RESTART
            action.__sigaction_handler.sa_handler = { signal in
                var number = UInt8(truncatingIfNeeded: signal)
                _ = write(Interrupts.pipeWrite, &number, 1)
            }
            sigaction(signal, &action, nil)
        }
    }

    /// Ends the process by `signal` with its default action (SIGINT, SIGTERM, SIGHUP: termination), so the
    /// status a shell or supervisor sees is the signal's — a shell script stops at a child's SIGINT.
    static func endBySignal(_ signal: Int32) -> Never {
        var action = sigaction()
        sigemptyset(&action.sa_mask)
        action.__sigaction_handler.sa_handler = nil  // SIG_DFL
        sigaction(signal, &action, nil)
        var only = sigset_t()
        sigemptyset(&only)
        sigaddset(&only, signal)
        pthread_sigmask(SIG_UNBLOCK, &only, nil)
        raise(signal)
        _exit(128 + signal)  // not reached: the default action of the three ends the process
    }

    /// `SIGINT`, `SIGTERM`, `SIGHUP`, or the number.
    static func name(of signal: Int32) -> String {
        switch signal {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }

    /// Removes the scratch stores killed runs left under `$TMPDIR` (`ScratchStore.removeAbandoned`) and says
    /// so on stderr; for the commands that make one, before they do.
    static func removeAbandonedScratchStores() {
        for found in ScratchStore.removeAbandoned() {
            printErr(
                "teamlog: removed \(found.path) (\(Progress.bytes(found.bytes))), the scratch store of a run that was killed")
        }
    }
}
