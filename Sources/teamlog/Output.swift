import ArgumentParser
import TeamLogThreads
import TeamLogStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads an environment variable.
func environment(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}

/// Writes all bytes to a file descriptor (retrying short writes and EINTR).
func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n < 0 {
            if errno == EINTR { continue }
            throw CLIError("write failed: \(String(cString: strerror(errno)))")
        }
        offset += n
    }
}

/// Prints text to standard output.
func printOut(_ text: String) throws { try writeAll(1, Array((text + "\n").utf8)) }

/// Prints text to standard error.
func printErr(_ text: String) { try? writeAll(2, Array((text + "\n").utf8)) }

/// A CLI failure with a message for stderr.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ text: String) { description = text }
}

/// A replay whose scratch store failed (`ScratchStore.isScratchFailure`: no room in `$TMPDIR`, or its
/// directory could not be made): said as such, exit 2 — the run found nothing about the store, and a
/// bare exit 1 would read as an audit's difference or a query's missing id.
func scratchFailed(_ what: String, _ error: any Error) -> ExitCode {
    Interrupts.waitIfStopping()  // a signal removed it: the signal ends the process, not this error
    printErr(
        "teamlog: \(what) could not run: its scratch store in \(ScratchStore.parentDirectory) failed: \(error). "
            + "Give TMPDIR a file system with room (about the size of the store's proj/ directory); the store "
            + "was not changed")
    return ExitCode(2)
}

/// Why a store could not be opened: a `StoreError` names the store itself; anything else gets its path.
func cannotOpen(_ path: String, _ error: any Error) -> CLIError {
    error is StoreError ? CLIError("\(error)") : CLIError("cannot open store \(path): \(error)")
}

/// Seconds from a monotonic clock.
func monotonicSeconds() -> Double { MonotonicClock.seconds() }
