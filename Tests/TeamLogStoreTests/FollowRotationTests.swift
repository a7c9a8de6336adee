import TeamLog
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#endif

/// `ingest --follow` of a file that is rotated under it. A truncation (`logrotate`'s `copytruncate`) went
/// unnoticed: reading went on at the old offset once the file grew past it — in the middle of a line
/// (`badJSON`), every line before that offset never read (a trial: 985 of 2,000 ops lost, exit 0, no
/// word). A rename left it reading the old file for good. Now both end the run, exit 2, with every line
/// read before answered and committed and what to do said.
@Suite struct FollowRotationTests {
    static func sends(_ range: ClosedRange<Int>) -> String {
        range.map { #"{"op":"message.send","actor":"a","to":{"type":"p2p","id":"b"},"messageId":"m\#($0)","opId":"o\#($0)","content":{"type":"text","text":"x"}}"# + "\n" }.joined()
    }

    static func append(_ path: String, _ text: String) throws {
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o644)
        #expect(fd >= 0)
        defer { close(fd) }
        let bytes = Array(text.utf8)
        #expect(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count)
    }

    func monotonicNow() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    func follow(_ directory: TemporaryDirectory, _ input: String) throws -> ChildProcess {
        try ChildProcess(
            TestSupport.teamlogExecutable,
            ["ingest", input, "--store", directory.child("store"), "--follow", "--flush-ms", "5", "--emit", "events"],
            stderr: directory.child("err"))
    }

    @Test func aTruncatedFileEndsTheRunWithEverythingReadCommitted() throws {
        let directory = TemporaryDirectory("follow-truncate")
        let input = directory.child("live.jsonl")
        try Self.append(input, Self.sends(1...100))
        let child = try follow(directory, input)
        #expect(try child.waitForOutput(containing: #""seq":100,"#, timeout: 60))
        #expect(truncate(input, 0) == 0)
        // Noticed while the reader waits at the end (it looks at every pause: a truncation and a regrowth
        // past the old size within one 2 ms wait would not be seen); then the new content, past the old
        // offset — before, read from there.
        let deadline = monotonicNow() + 30
        while child.poll() == nil && monotonicNow() < deadline { usleep(10_000) }
        try Self.append(input, Self.sends(101...300))
        let rest = try child.readToEnd(timeout: 60)
        #expect(child.wait() == .exited(2))
        let err = readTextFile(directory.child("err"))
        #expect(err.contains("live.jsonl was truncated"), "\(err)")
        #expect(!(child.lines + rest).contains { $0.contains("rejected") }, "nothing read from the middle of a line")
        let store = try Store(path: directory.child("store"))
        defer { store.close() }
        #expect(try store.head().seq == 100)
    }

    @Test func aRenamedFileEndsTheRunAfterItsLastLine() throws {
        let directory = TemporaryDirectory("follow-rename")
        let input = directory.child("live.jsonl")
        try Self.append(input, Self.sends(1...50))
        let child = try follow(directory, input)
        #expect(try child.waitForOutput(containing: #""seq":50,"#, timeout: 60))
        try Self.append(input, Self.sends(51...60))  // the old file's last lines, then it is moved away
        #expect(rename(input, input + ".1") == 0)
        try Self.append(input, Self.sends(61...70))
        _ = try child.readToEnd(timeout: 60)
        #expect(child.wait() == .exited(2))
        let err = readTextFile(directory.child("err"))
        #expect(err.contains("live.jsonl now names another file (rotated)"), "\(err)")
        let store = try Store(path: directory.child("store"))
        defer { store.close() }
        #expect(try store.head().seq == 60, "the old file read to its end, nothing of the new one")
    }
}
