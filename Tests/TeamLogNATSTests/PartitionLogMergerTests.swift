import TeamLog
import TeamLogRuntime
import Testing

/// `PartitionLogMerger` (`teamlog merge-logs`): the partitions' logs into one op stream for a new
/// deployment. The end-to-end check — a 2-partition deployment moved to 3 answers like one store — is
/// `ClusterTests.aDeploymentMovedToAnotherPartitionCountAnswersLikeOneStore`.
@Suite struct PartitionLogMergerTests {
    static func send(_ team: String, _ id: String, ts: Int, by actor: String = "u1") -> String {
        #"{"op":"message.send","actor":"\#(actor)","ts":\#(ts),"opId":"\#(id)","to":{"type":"team","id":"\#(team)"},"messageId":"\#(id)","content":{"type":"text","text":"x"}}"#
    }

    static func login(_ actor: String, ts: Int, opId: String? = nil, device: String = "phone") -> String {
        let id = opId.map { #","opId":"\#($0)""# } ?? ""
        return #"{"op":"client.login","actor":"\#(actor)","ts":\#(ts)\#(id),"device":"\#(device)"}"#
    }

    static func tick(ts: Int, opId: String? = nil) -> String {
        let id = opId.map { #","opId":"\#($0)""# } ?? ""
        return #"{"op":"clock.tick","actor":"system","ts":\#(ts)\#(id)}"#
    }

    /// The merged lines of `logs`, and the merger's counts.
    static func merge(_ logs: [[String]]) throws -> (lines: [String], counts: PartitionLogMerger.Counts) {
        var merger = try PartitionLogMerger(
            logs.enumerated().map { i, lines in
                var rest = lines[...]
                return PartitionLogMerger.Source(name: "log\(i)") { rest.popFirst().map { Array($0.utf8) } }
            })
        var out: [String] = []
        while let line = try merger.next() { out.append(String(decoding: line, as: UTF8.self)) }
        return (out, merger.counts)
    }

    /// A broadcast op is written once, after every log's ops before it and before every log's ops after
    /// it — even when a log's ops after it carry an earlier time than another log's ops before it (a
    /// merge by time alone would move them across it); between two broadcast ops, ops go by time.
    @Test func broadcastOpsLineTheLogsUpAndAreWrittenOnce() throws {
        let a = [Self.send("t1", "a1", ts: 10), Self.send("t1", "a2", ts: 50), Self.login("u9", ts: 50, opId: "L"), Self.send("t1", "a3", ts: 60)]
        let b = [Self.send("t2", "b1", ts: 20), Self.send("t2", "b2", ts: 30), Self.login("u9", ts: 40, opId: "L"), Self.send("t2", "b3", ts: 45)]
        let merged = try Self.merge([a, b])
        #expect(merged.lines == [a[0], b[0], b[1], a[1], b[2], b[3], a[3]])  // the login's earliest copy: b's
        #expect(merged.counts.written == 7 && merged.counts.read == [4, 4] && merged.counts.broadcasts == 1)
    }

    /// Copies that differ (other than in `ts`) are not one deployment's: the merge stops naming both lines.
    @Test func logsThatDisagreeOnABroadcastOpStop() throws {
        let a = [Self.send("t1", "a1", ts: 10), Self.login("u9", ts: 20, opId: "L")]
        let b = [Self.login("u8", ts: 20, opId: "M")]
        #expect {
            _ = try Self.merge([a, b])
        } throws: { error in
            let text = "\(error)"
            return text.contains("log0 line 2 (client.login by u9, opId L)")
                && text.contains("log1 line 1 (client.login by u8, opId M)") && text.contains("not the logs of one deployment")
        }
        // The same op seen from another device is another op too.
        #expect(throws: PartitionLogMerger.Failure.self) {
            _ = try Self.merge([[Self.login("u9", ts: 1, opId: "L")], [Self.login("u9", ts: 1, opId: "L", device: "pc")]])
        }
    }

    /// A tick without an opId (a partition's own members sync, as `teamlog log` writes it) is in one log
    /// only: merged by time, it lines nothing up — a log holding one does not stop the merge.
    @Test func aTickWithoutAnOpIdIsMergedByTime() throws {
        let a = [Self.send("t1", "a1", ts: 10), Self.tick(ts: 35), Self.login("u9", ts: 40, opId: "L")]
        let b = [Self.send("t2", "b1", ts: 30), Self.login("u9", ts: 40, opId: "L"), Self.tick(ts: 41, opId: "T")]
        let c = [Self.login("u9", ts: 40, opId: "L"), Self.tick(ts: 42, opId: "T")]
        let merged = try Self.merge([a, b, c])
        #expect(merged.lines == [a[0], b[0], a[1], a[2], b[2]])
        // The login, and the tick with an opId (log a had ended: only b and c line up there).
        #expect(merged.counts.broadcasts == 2)
    }

    /// A log that ends (exported earlier than the others) takes no part in what follows.
    @Test func aLogThatEndsEarlyTakesNoPartAfterItsEnd() throws {
        let a = [Self.send("t1", "a1", ts: 10)]
        let b = [Self.send("t2", "b1", ts: 5), Self.login("u9", ts: 20, opId: "L"), Self.send("t2", "b2", ts: 30)]
        let merged = try Self.merge([a, b])
        #expect(merged.lines == [b[0], a[0], b[1], b[2]])
        #expect(try Self.merge([[], []]).lines.isEmpty)
    }

    /// A read with `upTo` names a seq of its old partition: counted (the command warns), moved as it is.
    @Test func readsWithUpToAreCounted() throws {
        let read = #"{"op":"message.read","actor":"u2","ts":30,"to":{"type":"team","id":"t1"},"upTo":1}"#
        let readAll = #"{"op":"message.read","actor":"u3","ts":31,"to":{"type":"team","id":"t1"}}"#
        let merged = try Self.merge([[Self.send("t1", "a1", ts: 10), read, readAll], [Self.send("t2", "b1", ts: 20)]])
        #expect(merged.lines.count == 4 && merged.counts.readsWithUpTo == 1)
    }

    /// What is not an export is named with its line.
    @Test func aLineThatIsNotAnExportedOpIsNamed() throws {
        #expect {
            _ = try Self.merge([[Self.send("t1", "a1", ts: 1), "{not json"]])
        } throws: { "\($0)".contains("log0 line 2 is not an op") }
        #expect {
            _ = try Self.merge([[#"{"op":"clock.tick","actor":"system"}"#]])
        } throws: { "\($0)".contains("log0 line 1 has no ts") }
    }
}
