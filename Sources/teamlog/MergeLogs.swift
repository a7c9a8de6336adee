import ArgumentParser
import TeamLog
import TeamLogRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `teamlog merge-logs`: the logs of a NATS deployment's partitions (`teamlog log` of each store) merged
/// into one op stream, for `teamlog route` to feed a new deployment with another partition count
/// (`PartitionLogMerger`; docs/nats.md, *Changing the partition count*).
struct MergeLogs: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "merge-logs",
        abstract: "Merge the partitions' logs (teamlog log of each) into one op stream to route to a new deployment.",
        discussion: """
            Each key's ops keep their order, and an op sent to every partition (login, logout, a tick with an \
            opId) is written once, where every log has it. Writes JSON Lines to stdout; says what it merged \
            on stderr. Exit 1 when the logs disagree on such an op (not one deployment's).
            """)

    @Argument(help: "The partitions' exports (`teamlog log --store P > FILE`), one per partition.")
    var files: [String]

    func validate() throws {
        if files.isEmpty { throw ValidationError("give the export of every partition") }
        if files.contains("-") { throw ValidationError("each log is a file (stdin cannot be merged with others)") }
    }

    func run() throws {
        var descriptors: [Int32] = []
        defer { for fd in descriptors { close(fd) } }
        var sources: [PartitionLogMerger.Source] = []
        var total = 0
        var readers: [LineReaderBox] = []
        for file in files {
            let fd = open(file, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw CLIError("cannot open \(file): \(String(cString: strerror(errno)))") }
            descriptors.append(fd)
            var st = stat()
            if fstat(fd, &st) == 0 { total += Int(st.st_size) }
            // A `teamlog log` line is an accepted op's: within the 1 MiB input limit, written back a little
            // longer at most (escapes); any longer is not an export.
            let box = LineReaderBox(LineReader(fd: fd, limit: 4 << 20))
            readers.append(box)
            sources.append(
                PartitionLogMerger.Source(name: file) {
                    switch try box.reader.next() {
                    case nil: return nil
                    case .text(_, let bytes)?: return bytes
                    case .tooLong(let number, let length)?:
                        throw CLIError("\(file) line \(number) is \(length) bytes: not a `teamlog log` export")
                    }
                })
        }
        let progress = Progress("merge-logs", total: total, unit: .bytes)
        var merger: PartitionLogMerger
        var out: [UInt8] = []
        out.reserveCapacity(1 << 20)
        do {
            merger = try PartitionLogMerger(sources)
            while let line = try merger.next() {
                out.append(contentsOf: line)
                out.append(0x0A)
                if out.count >= 1 << 20 {
                    progress.beforeStdout()
                    try writeAll(1, out)
                    out.removeAll(keepingCapacity: true)
                    if progress.isOn { progress.update(readers.reduce(0) { $0 + $1.reader.bytesConsumed }) }
                }
            }
            progress.beforeStdout()
            try writeAll(1, out)
        } catch {
            progress.clear()
            progress.beforeStdout()
            try? writeAll(1, out)  // what was merged before the problem
            printErr("teamlog: merge-logs: \(error)")
            throw ExitCode(1)
        }
        progress.finish()
        let c = merger.counts
        let parts = zip(files, c.read).map { "\($0) \($1)" }.joined(separator: ", ")
        printErr(
            "merged \(c.read.reduce(0, +)) lines (\(parts)) into \(c.written): \(c.broadcasts) ops every partition "
                + "had, each written once")
        if c.readsWithUpTo > 0 {
            printErr(
                "teamlog: warning: \(c.readsWithUpTo) message.read ops carry upTo, a seq of their old partition: the new "
                    + "deployment numbers its events anew, so there they mark another position (a read without upTo, "
                    + "up to the newest, is moved exactly)")
        }
    }
}

/// A line reader the merge's sources share by reference.
private final class LineReaderBox {
    var reader: LineReader
    init(_ reader: LineReader) { self.reader = reader }
}
