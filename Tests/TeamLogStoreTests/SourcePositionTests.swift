import TeamLog
import TeamLogRuntime
import TeamLogStore
import TeamLogThreads
import TestSupport
import Testing

/// Issue 13's exactly-once contract at the store: a stream input's position and its records (the
/// outbox) are committed in the transaction of its events, survive a reopen, and an outbox entry is gone
/// once its publish is confirmed.
@Suite struct SourcePositionTests {
    static func op(_ line: String) -> ParsedLine {
        ParsedLine.parse(.text(number: 7, bytes: Array(line.utf8)))
    }

    @Test func positionAndOutboxCommitWithTheEventsAndSurviveReopen() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("s")
        do {
            let store = try Store(path: path)
            #expect(store.sourcePosition == 0)
            _ = try store.submit(
                Op(actor: Id("u1"), ts: 1_000, body: .teamCreate(TeamCreate(team: Id("t1")))), now: 0)
            store.stageSource(position: 41, outbox: [(41, [1, 2, 3])])
            // Staged but not committed: a crash here (close drops pending work) loses both.
            #expect(store.sourcePosition == 0)
            try store.commit()
            #expect(store.sourcePosition == 41)
            store.close()
        }
        do {
            let store = try Store(path: path)
            #expect(store.sourcePosition == 41)
            #expect(try store.outboxEntries().map(\.0) == [41])
            #expect(try store.outboxEntries().first?.1 == [1, 2, 3])
            #expect(try store.teamView(Id("t1")) != nil)
            // A rejected input without opId has no event: the position still commits, alone.
            store.stageSource(position: 42, outbox: [(42, [9])])
            try store.commit()
            #expect(store.sourcePosition == 42)
            store.stagePublished([41])
            try store.commit()
            #expect(try store.outboxEntries().map(\.0) == [42])
            #expect(try store.outboxEntries(after: 42).isEmpty)
            store.close()
        }
        let reopened = try Store(path: path)
        #expect(reopened.sourcePosition == 42)
        #expect(try reopened.outboxEntries().map(\.0) == [42])
    }

    @Test func uncommittedPositionIsLostWithItsEvents() throws {
        let dir = TemporaryDirectory()
        let path = dir.child("s")
        do {
            let store = try Store(path: path)
            _ = try store.submit(
                Op(actor: Id("u1"), ts: 1_000, body: .teamCreate(TeamCreate(team: Id("t1")))), now: 0)
            store.stageSource(position: 5, outbox: [(5, [5])])
            store.close()  // nothing committed: as a crash before the commit
        }
        let store = try Store(path: path)
        #expect(store.sourcePosition == 0)
        #expect(try store.outboxEntries().isEmpty)
        #expect(try store.teamView(Id("t1")) == nil)
    }

    /// Through the writer service: every record an input produces goes to the outbox, whatever a
    /// request would print, and the service reports the committed position.
    @Test func writerServiceWritesEveryRecordOfAStreamInput() throws {
        let dir = TemporaryDirectory()
        let writer = WriterService(path: dir.child("s"))
        defer { writer.stop() }
        while writer.state == .opening { usleepMs(2) }
        let lines = [
            #"{"op":"team.create","actor":"a","ts":1000,"team":"t","members":["b","c"]}"#,
            #"{"op":"message.send","actor":"a","ts":1001,"to":{"type":"team","id":"t"},"messageId":"m1","content":{"type":"text","text":"hi"}}"#,
            #"{"op":"team.kick","actor":"b","ts":1002,"team":"t","targets":["c"]}"#,
        ]
        var results: [OutboxRecords] = []
        for (i, line) in lines.enumerated() {
            let box = ResultBox<[UInt8]>()
            writer.submit(Self.op(line), source: UInt64(10 + i)) { box.set($0) }
            results.append(try OutboxRecords(decoding: try box.wait().get()))
        }
        #expect(writer.sourcePosition == 12)
        #expect(results[0].entries.map(\.kind) == ["event", "tip", "delivery"])  // the tip is delivered too
        #expect(results[1].entries.map(\.kind) == ["event", "delivery"])
        #expect(results[2].entries.map(\.kind) == ["rejected"])
        #expect(String(decoding: results[2].entries[0].json, as: UTF8.self).contains(#""line":7"#))
        let unpublished = try writer.unpublished()
        #expect(unpublished.map(\.position) == [10, 11, 12])
        #expect(unpublished.map(\.records) == results)
        #expect(try writer.unpublishedCount() == 3)
        writer.confirmPublished([10, 11])
        // The confirmation commits on its own when nothing else comes.
        var left = try writer.unpublished().map(\.position)
        for _ in 0..<500 where left != [12] {
            usleepMs(2)
            left = try writer.unpublished().map(\.position)
        }
        #expect(left == [12])
        #expect(try writer.unpublishedCount() == 1)  // counted, as the partition's status reports it
    }
}

extension SourcePositionTests {
    /// A group of submissions also ends once its records reach `maxGroupRecordBytes` (they wait in memory
    /// until it is durable, and a large team's are megabytes): with a bound of one byte every submission is
    /// a group of its own — each answered with its own records, in order — while without it the queued
    /// submissions share groups.
    @Test(arguments: [1, 64 << 20])
    func aGroupEndsAtItsRecordBytes(maxGroupRecordBytes: Int) throws {
        let dir = TemporaryDirectory()
        var options = WriterService.Options()
        options.maxGroupRecordBytes = maxGroupRecordBytes
        let largest = Largest()
        let writer = WriterService(path: dir.child("s"), options: options) { largest.note($0.submissions) }
        defer { writer.stop() }
        while writer.state == .opening { usleepMs(2) }
        let create = #"{"op":"team.create","actor":"a","ts":1000,"team":"t","members":["b","c"]}"#
        let created = ResultBox<[UInt8]>()
        writer.submit(Self.op(create), source: 1) { created.set($0) }
        _ = try created.wait().get()
        let boxes = (2...301).map { i in
            let box = ResultBox<[UInt8]>()
            let line =
                #"{"op":"message.send","actor":"a","ts":\#(1000 + i),"to":{"type":"team","id":"t"},"messageId":"m\#(i)","content":{"type":"text","text":"hi"}}"#
            writer.submit(Self.op(line), source: UInt64(i)) { box.set($0) }
            return box
        }
        for (i, box) in boxes.enumerated() {
            let records = try OutboxRecords(decoding: try box.wait().get())
            #expect(records.entries.map(\.kind) == ["event", "delivery"])
            #expect(String(decoding: records.entries[1].json, as: UTF8.self).contains(#""messageId":"m\#(i + 2)""#))
        }
        #expect(writer.sourcePosition == 301)
        if maxGroupRecordBytes == 1 {
            #expect(largest.value == 1, "every group one submission")
        } else {
            #expect(largest.value > 1, "queued submissions share a group: the bound above is what splits them")
        }
    }

    /// A group of submissions holds every record it produced until it is answered; after that nothing may
    /// keep it. (Each processor's observer captured its group, and the group held the processors: every
    /// group of a server leaked its records, ~20 KB per op of the mixed workload, 2 GB after 100,000 ops of
    /// a NATS partition.)
    @Test func answeredGroupsAreFreed() throws {
        let dir = TemporaryDirectory()
        let writer = WriterService(path: dir.child("s"))
        defer { writer.stop() }
        while writer.state == .opening { usleepMs(2) }
        let create = #"{"op":"team.create","actor":"a","ts":1000,"team":"t","members":["b","c"]}"#
        for i in 0..<40 {
            let box = ResultBox<[UInt8]>()
            let line =
                i == 0
                ? create
                : #"{"op":"message.send","actor":"a","ts":\#(1000 + i),"to":{"type":"team","id":"t"},"messageId":"m\#(i)","content":{"type":"text","text":"hi"}}"#
            if i % 2 == 0 {
                writer.submit(Self.op(line), source: UInt64(1 + i)) { box.set($0) }
            } else {
                writer.submit([Self.op(line)], emit: .all) { box.set($0.map(WriterService.encode)) }
            }
            _ = try box.wait().get()
        }
        var live = writer.liveGroups
        for _ in 0..<500 where live > 0 {
            usleepMs(2)
            live = writer.liveGroups
        }
        #expect(live == 0, "groups still alive after all 40 were answered: \(live)")
    }
}

/// One result handed between threads.
final class ResultBox<Value: Sendable>: @unchecked Sendable {
    private let monitor = Monitor()
    private var value: Result<Value, WriterService.Failure>?
    func set(_ v: Result<Value, WriterService.Failure>) {
        monitor.locked {
            value = v
            monitor.broadcast()
        }
    }
    func wait() -> Result<Value, WriterService.Failure> {
        monitor.locked {
            monitor.wait { value != nil }
            return value!
        }
    }
}

func usleepMs(_ ms: Int) {
    var ts = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
    _ = nanosleep(&ts, nil)
}

#if canImport(Glibc)
    import Glibc
#endif

/// The largest number a callback saw.
final class Largest: @unchecked Sendable {
    private let monitor = Monitor()
    private var _value = 0
    func note(_ n: Int) { monitor.locked { _value = max(_value, n) } }
    var value: Int { monitor.locked { _value } }
}
