import ArgumentParser
import TeamLog
import TeamLogRuntime
import TeamLogStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `teamlog ingest FILE|-`: JSON Lines of ops in, SPEC §4 records out, a summary on stderr.
struct Ingest: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Validate, log and project a file of operations.")

    @OptionGroup var storeOptions: StoreOptions

    @Argument(help: "A file of JSON Lines operations, or - for standard input.")
    var file: String

    @Option(help: "Records to print: all, events or none.")
    var emit: String = "all"

    @Option(help: "Ops per durable commit.")
    var batchSize: Int = 10_000

    @Flag(help: "Skip fsync at commit (faster; a crash may lose the last batches, never tear one).")
    var noSync = false

    @Flag(
        help:
            "Stream mode: keep reading a live feed (stdin, a FIFO, or a growing file) until it ends or SIGINT/SIGTERM/SIGHUP.")
    var follow = false

    @Option(help: "Stream mode: commit at the latest this many ms after the first uncommitted op.")
    var flushMs: Int = 10

    @Flag(
        help:
            "Go on from where the store's last ingest of this input stopped (crash, signal, or the end of a file that has grown since): the input position its last commit recorded, checked against FILE's line there.")
    var resume = false

    @Flag(
        help:
            "Verify the whole log's hash chain before appending (an open otherwise checks only the log after the projections' checkpoint; `audit` checks it all)."
    )
    var verifyChain = false

    @OptionGroup var writer: WriterOptions

    @OptionGroup var settings: SettingsOptions

    /// Checked before `run` (so a wrong value is answered with this command's usage, not the root's).
    func validate() throws {
        guard Processor.Emit(rawValue: emit) != nil else { throw ValidationError("--emit must be all, events or none") }
        guard batchSize > 0 else { throw ValidationError("--batch-size must be positive") }
    }

    func run() throws {
        let emitMode = Processor.Emit(rawValue: emit)!  // validated
        let fd: Int32 = file == "-" ? 0 : open(file, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CLIError("cannot open \(file): \(String(cString: strerror(errno)))") }
        defer { if fd != 0 { close(fd) } }
        // Input bytes of a regular file (FILE, or `-` redirected from one) from where reading starts; a
        // pipe has no total (position and rate only). Stream mode shows none: a live feed has no end.
        var st = stat()
        let size = fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG ? Int(st.st_size) : nil
        // Refused before the store is opened: a `--resume` from a pipe made an empty store first (a trial).
        if resume && size == nil {
            printErr("teamlog: --resume needs a regular file (a pipe cannot be read from a position)")
            throw ExitCode(2)
        }

        var storeOpts = Store.Options()
        storeOpts.partitionRole = .standalone
        storeOpts.noSync = noSync
        storeOpts.verifyChainAtOpen = verifyChain
        storeOpts.requestedConfig = settings.request
        try writer.apply(to: &storeOpts)
        let store: Store
        do { store = try Store(path: storeOptions.path, options: storeOpts) } catch {
            throw cannotOpen(storeOptions.path, error)
        }
        if let refusal = store.refusal {
            printErr("teamlog: \(refusal)")
            throw ExitCode(2)
        }
        var options = Processor.Options()
        options.emit = emitMode
        options.batchSize = batchSize
        // A regular file's place is kept with each commit (`InputPosition`), for `--resume`.
        var startOffset = size == nil ? 0 : max(0, Int(lseek(fd, 0, SEEK_CUR)))
        var linesBefore = 0
        if resume, let size {  // a pipe was refused above
            let position: InputPosition
            do {
                position = try Self.checkedResumePosition(store: store, fd: fd, size: size, file: file)
            } catch let error as CLIError {
                printErr("teamlog: \(error.description)")
                throw ExitCode(2)
            }
            guard lseek(fd, off_t(position.offset), SEEK_SET) >= 0 else {
                throw CLIError("cannot seek \(file): \(String(cString: strerror(errno)))")
            }
            startOffset = Int(position.offset)
            linesBefore = Int(position.line)
            printErr("teamlog: resuming \(file) after line \(position.line) (byte \(position.offset))")
        }
        let total = size.map { max(0, $0 - startOffset) }
        let progress = Progress("ingest", total: total, unit: .bytes, when: !follow)
        let processor = Processor(store: store, options: options) { bytes in
            progress.beforeStdout()
            try writeAll(1, bytes)
        }
        if progress.isOn { processor.progress = { progress.update($0) } }
        if size != nil { processor.input = (file, UInt64(startOffset)) }
        // Said when it happens (a `--follow` runs for days): while checkpoints fail the log goes on, but
        // other processes' queries stay at the last checkpoint and its changes wait in memory.
        store.onCheckpointFailure = { problem in
            progress.clear()
            printErr("teamlog: warning: \(problem)")
        }
        store.onCheckpointRecovered = { seq in
            progress.clear()
            printErr("teamlog: the projections' checkpoint succeeded again, at seq \(seq)")
        }
        var reader = LineReader(
            fd: fd, follow: follow, linesBefore: linesBefore, path: follow && file != "-" ? file : nil)
        let start = monotonicSeconds()
        StopSignal.install()
        var complete = true
        var inputChanged: LineReader.InputChanged?
        do {
            if follow {
                do { try processor.follow(reader, flushMs: max(0, flushMs)) { StopSignal.requested } } catch
                    let error as LineReader.InputChanged
                { inputChanged = error }
            } else {
                complete = try processor.run(&reader) {
                    guard StopSignal.requested else { return false }
                    progress.clear()
                    printErr(
                        "teamlog: \(StopSignal.name): stopping: the lines read so far are answered and committed "
                            + "(the same signal again stops at once, as a crash would)")
                    return true
                }
            }
        } catch {
            progress.clear()
            printErr("teamlog: store failure: \(error)")
            throw ExitCode(2)
        }
        progress.finish()
        store.close()  // a last checkpoint: the next open replays nothing
        if let problem = store.checkpointProblem {
            printErr(
                "teamlog: warning: the last checkpoint failed too (\(problem)); the next open replays the log "
                    + "after seq \(store.checkpoint.seq) into the projections")
        }
        let elapsed = max(monotonicSeconds() - start, 1e-9)
        let s = processor.summary
        let rate = Double(s.lines) / elapsed
        printErr(
            "accepted \(s.accepted), rejected \(s.rejected), duplicates \(s.duplicates), \(Int(rate)) ops/s (\(s.lines) lines in \(String(format3(elapsed))) s, \(s.commits) commits)"
        )
        // Closed: its log and projections are written and its writer lock released. Freeing its working
        // set object by object on the way out took a twentieth of a 400,000-op ingest's main thread (perf:
        // `Store.deinit`, millions of small allocations); the exit that follows frees it at once.
        keepUntilExit(store)
        if !complete {
            // Not the end of the input: a script must not go on as if it were, so the run ends by the
            // signal (the status a shell or supervisor sees is the signal's), after saying where to resume.
            let next = s.lastLine + 1
            let resume =
                size == nil
                ? "the rest of \(file == "-" ? "standard input" : file) (from its line \(next)) was not read"
                : "the input from line \(next) was not read; to go on: teamlog ingest \(file) --store \(storeOptions.path) --resume"
            printErr(
                "teamlog: \(StopSignal.name): stopped after line \(s.lastLine), every line through it answered and "
                    + "committed; \(resume)")
            Interrupts.endBySignal(StopSignal.signal)
        }
        if let inputChanged {
            printErr("teamlog: \(inputChanged)")
            throw ExitCode(2)
        }
    }
}

extension Ingest {
    /// The input position the store's last commit recorded, once FILE is seen to continue it: at least as
    /// long, and its line ending at that offset the recorded one (by checksum, or only its newline for a
    /// line that was over the limit).
    static func checkedResumePosition(store: Store, fd: Int32, size: Int, file: String) throws -> InputPosition {
        guard let position = try store.inputPosition() else {
            throw CLIError(
                "--resume: the store records no input position (no `ingest` of a file since this release "
                    + "wrote to it, or `repair` cut its log since): feed the input again — ops with an opId are "
                    + "answered as duplicates — or from the line you know")
        }
        let what = "line \(position.line) of \(position.path), which ends at byte \(position.offset)"
        guard position.offset <= UInt64(size) else {
            throw CLIError(
                "--resume: \(file) is \(size) bytes, shorter than the \(position.offset) the store has read of its "
                    + "input (\(what)): not that input")
        }
        guard position.offset > 0 else { return position }
        // The line ending at the offset: back from its end to the newline before it — at most
        // `OpParser.maxLineBytes` of content, its CR and LF, and that newline (one over the limit has no
        // checksum: only its end is read).
        let window = Int(min(position.offset, UInt64(OpParser.maxLineBytes + 3)))
        var bytes = [UInt8](repeating: 0, count: window)
        let got = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, window, off_t(position.offset) - off_t(window)) }
        guard got == window else { throw CLIError("--resume: cannot read \(file): \(String(cString: strerror(errno)))") }
        var end = window
        let endsWithNewline = bytes[end - 1] == 0x0A
        if endsWithNewline { end -= 1 }
        // Only the input's last line may end without a newline, and then nothing was added to it since.
        guard endsWithNewline || position.offset == UInt64(size) else {
            throw CLIError("--resume: \(file) has no line ending at byte \(position.offset), where \(what): not that input")
        }
        guard position.lineChecksum != 0 else { return position }
        var start = end
        while start > 0 && bytes[start - 1] != 0x0A { start -= 1 }
        guard start > 0 || UInt64(window) == position.offset else {
            throw CLIError("--resume: \(file)'s line ending at byte \(position.offset) is not \(what): not that input")
        }
        if end > start && bytes[end - 1] == 0x0D { end -= 1 }  // a CRLF line's CR is not content
        let checksum = bytes[start..<end].withUnsafeBytes { InputPosition.checksum($0) }
        guard checksum == position.lineChecksum else {
            throw CLIError(
                "--resume: \(file)'s line ending at byte \(position.offset) is not \(what) (its bytes differ): not "
                    + "that input, or it was rewritten")
        }
        return position
    }
}

/// Keeps `object` alive until the process exits, so its deinitialization never runs: for what only
/// memory would free (a closed store's state), which the exit returns at once.
func keepUntilExit(_ object: AnyObject) {
    _ = Unmanaged.passRetained(object)
}

/// A number with three decimals, without Foundation.
func format3(_ x: Double) -> String {
    let scaled = Int((x * 1000).rounded())
    let frac = String(scaled % 1000)
    return "\(scaled / 1000).\(String(repeating: "0", count: 3 - frac.count))\(frac)"
}

/// SIGINT/SIGTERM/SIGHUP in `ingest`: note the request; the run answers and commits what it read and
/// stops cleanly (stream mode: exit 0; a file: the summary, where to resume, then the signal's status).
/// The handler is reset when it runs, so the same signal again ends the process at once — as a crash would,
/// which the store recovers from.
enum StopSignal {
    nonisolated(unsafe) static var flag: sig_atomic_t = 0

    static var requested: Bool { flag != 0 }

    /// The signal that asked for the stop (0 before one did).
    static var signal: Int32 { Int32(flag) }

    static var name: String { Interrupts.name(of: signal) }

    static func install() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { signal in
            if StopSignal.flag == 0 { StopSignal.flag = sig_atomic_t(signal) }
        }
        sigemptyset(&action.sa_mask)
        // No SA_RESTART: a blocked poll or read returns EINTR and the loop sees the flag. SA_RESETHAND: the
        // default action again for the next one.
        action.sa_flags = Int32(bitPattern: UInt32(SA_RESETHAND))
        sigaction(SIGINT, &action, nil)
        sigaction(SIGTERM, &action, nil)
        sigaction(SIGHUP, &action, nil)  // a closed terminal or ssh session: a clean stop too
    }
}
