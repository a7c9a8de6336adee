import TeamLog
import TestSupport
import Testing

@testable import TeamLogStore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The `teamlog` commands as a user runs them: the shipped examples through `ingest`, every query's
/// `--json` shape and exit status, `--at`, and `log` exported into a new store that audits equal.
@Suite struct CLITests {
    static let exe = TestSupport.teamlogExecutable

    /// The repository's `tools/examples` directory, from this file's path.
    static var examples: String {
        let path = #filePath
        let root = path.split(separator: "/").dropLast(3).joined(separator: "/")
        return "/" + root + "/tools/examples"
    }

    func run(_ args: [String], stdin: String? = nil) throws -> (ChildProcess.Status, [String]) {
        try ChildProcess.run(Self.exe, args, stdin: stdin, timeout: 60)
    }

    /// Every output line parsed as a record with a `kind`: a line that is not one fails the test.
    static func records(_ lines: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> [JSONValue] {
        try lines.map { line in
            let record = try JSONParser.parse(line)
            #expect(record["kind"]?.stringValue != nil, "not a record: \(line)", sourceLocation: sourceLocation)
            return record
        }
    }

    func json(_ args: [String]) throws -> JSONValue {
        let (status, lines) = try run(args)
        #expect(status == .exited(0), "\(args)")
        return try JSONParser.parse(try #require(lines.first))
    }

    /// A wrong option value is a usage error (exit 64) naming the command's own usage, whatever checks it:
    /// values checked inside `run` were answered with the root's "teamlog <subcommand>" usage; and it is
    /// checked before anything is opened or created.
    @Test(arguments: [
        (["ingest", "x.jsonl", "--emit", "bogus"], "--emit must be", "teamlog ingest"),
        (["ingest", "x.jsonl", "--batch-size", "0"], "--batch-size must be positive", "teamlog ingest"),
        (["ingest", "x.jsonl", "--checkpoint-ops", "0"], "--checkpoint-ops must be", "teamlog ingest"),
        (["ingest", "x.jsonl", "--cache-mb", "0"], "--cache-mb must be at least 1", "teamlog ingest"),
        (["serve", "--body-limit", "0"], "--body-limit", "teamlog serve"),
        (["serve", "--listen", "nope"], "--listen must be", "teamlog serve"),
        (["serve", "--at-replays", "-1"], "--at-replays", "teamlog serve"),
        (["serve", "--protect-reads"], "--protect-reads needs --token-file", "teamlog serve"),
        (["serve", "--partition", "1", "--partitions", "2"], "--partition is for --nats", "teamlog serve"),
        (["backup", "--to", "copy", "--nice", "25"], "--nice must be from 0 to 19", "teamlog backup"),
        (["audit", "--nice", "20"], "--nice must be from 0 to 19", "teamlog audit"),
        (["audit", "--cache-mb", "0"], "--cache-mb must be from 1 to", "teamlog audit"),
        (["repair", "--cache-mb", "0"], "--cache-mb must be from 1 to", "teamlog repair"),
        (["log", "--from", "5", "--to", "2"], "--to 2 is before --from 5", "teamlog log"),
        // Seqs past 2^63 - 1 trapped converting to Int (exit 132); `--at 0` answered as an empty store.
        (["log", "--from", "9223372036854775808"], "--from must be a seq", "teamlog log"),
        (["log", "--to", "18446744073709551615"], "--to must be a seq", "teamlog log"),
        (["unread", "u1", "--at", "9223372036854775808"], "--at must be a seq", "teamlog unread"),
        (["team", "t", "--at", "0"], "--at must be a seq", "teamlog team"),
        // Ids checked as a line naming them would be (serve: 400 badId). An empty one was an LMDB error
        // (MDB_BAD_VALSIZE), a control byte was printed raw in "no team …", `unread` answered all three.
        (["team", ""], "the team id is empty (badId)", "teamlog team"),
        (["unread", "a\u{01}"], "the user id contains a control character (badId)", "teamlog unread"),
        (["channel", String(repeating: "c", count: 129)], "the channel id is 129 bytes, longer than 128", "teamlog channel"),
        (["log", "--team", ""], "--team is empty (badId)", "teamlog log"),
    ])
    func aWrongOptionValueIsAUsageErrorOfItsCommand(arguments: [String], message: String, usage: String) throws {
        let directory = TemporaryDirectory("usage")
        let store = directory.child("store")
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, arguments + ["--store", store], stderr: directory.child("err"), timeout: 60)
        let err = readTextFile(directory.child("err"))
        #expect(run.status == .exited(64), "\(err)")
        #expect(err.contains(message), "\(err)")
        #expect(err.contains("Usage: \(usage)"), "\(err)")
        #expect(access(store, F_OK) != 0, "nothing created")
    }

    /// `log` says what a store made from its export must be told: settings other than the defaults (a
    /// trial: a 2,100-member team refused `teamFull` by a default store, and all after it), and reads
    /// whose `upTo` names a seq that a partial export renumbers (a `--team` export answered other unread
    /// counts, silently). A whole export of a default store says neither.
    @Test func logSaysWhatAStoreMadeFromItsExportNeeds() throws {
        let directory = TemporaryDirectory("log-notes")
        let store = directory.child("store")
        let ops = directory.child("ops.jsonl")
        try CrashSafetyTests.writeFile(
            ops,
            Array(
                [
                    op("team.create", "a", ["team": "x", "name": "X", "members": ["b"], "ts": 1]),
                    op("team.create", "a", ["team": "y", "name": "Y", "members": ["b"], "ts": 2]),
                    op("message.send", "a", ["to": ["type": "team", "id": "x"] as KeyValuePairs<String, Any>, "messageId": "m1", "content": ["type": "text"] as KeyValuePairs<String, Any>, "ts": 3]),
                    op("message.read", "b", ["to": ["type": "team", "id": "x"] as KeyValuePairs<String, Any>, "upTo": 3, "ts": 4]),
                ].map { $0 + "\n" }.joined().utf8))
        #expect(try ChildProcess.run(Self.exe, ["ingest", ops, "--store", store, "--max-team-members", "3000"], timeout: 60).status == .exited(0))
        for (args, says) in [
            (["log"], ["--max-team-members 3000 --max-super-team-members 200000 --members-sync-ms 120000"]),
            (["log", "--team", "x"], ["1 exported message.read ops carry upTo", "--max-team-members 3000"]),
        ] {
            let run = try ChildProcess.run(Self.exe, args + ["--store", store], stderr: directory.child("err"), timeout: 60)
            let err = readTextFile(directory.child("err"))
            #expect(run.status == .exited(0))
            for text in says { #expect(err.contains(text), "\(args): \(err)") }
            if args == ["log"] { #expect(!err.contains("upTo"), "a whole export keeps every seq") }
        }
        let plain = directory.child("plain")
        #expect(try ChildProcess.run(Self.exe, ["ingest", ops, "--store", plain], timeout: 60).status == .exited(0))
        let run = try ChildProcess.run(Self.exe, ["log", "--store", plain], stderr: directory.child("err"), timeout: 60)
        #expect(run.status == .exited(0) && readTextFile(directory.child("err")).isEmpty)
    }

    /// `--resume` from a pipe is refused before anything is made: it left an empty store behind (a trial).
    @Test func resumeFromAPipeIsRefusedBeforeAStoreIsMade() throws {
        let directory = TemporaryDirectory("resume-pipe")
        let store = directory.child("store")
        let run = try ChildProcess.run(
            "/bin/sh", ["-c", "echo '{}' | exec \"$0\" ingest - --follow --resume --store \"$1\"", Self.exe, store],
            stderr: directory.child("err"), timeout: 60)
        #expect(run.status == .exited(2))
        #expect(readTextFile(directory.child("err")).contains("--resume needs a regular file"))
        #expect(access(store, F_OK) != 0, "no store made")
    }

    /// An id argument whose bytes are not UTF-8 is no id: Swift decodes `argv` repairing them to U+FFFD, and
    /// `team $'\\xff'` answered the team named "\u{FFFD}" (a trial); now a usage error, as `serve` answers
    /// 400 `badId`. The same id written as U+FFFD itself is still that team.
    @Test func anIdArgumentThatIsNotUTF8IsRefused() throws {
        let directory = TemporaryDirectory("bad-utf8")
        let store = directory.child("store")
        let line = #"{"op":"team.create","actor":"a","team":"\ufffd","name":"R"}"#
        let ops = directory.child("ops.jsonl")
        try CrashSafetyTests.writeFile(ops, Array((line + "\n").utf8))
        let (made, _) = try ChildProcess.run(Self.exe, ["ingest", ops, "--store", store], timeout: 60)
        #expect(made == .exited(0))
        for (command, what) in [("team", "the team id"), ("unread", "the user id"), ("log --team", "--team")] {
            let run = try ChildProcess.run(
                "/bin/sh", ["-c", "exec \"$0\" \(command) \"$(printf 'z\\377')\" --store \"$1\"", Self.exe, store],
                stderr: directory.child("err"), timeout: 60)
            let err = readTextFile(directory.child("err"))
            #expect(run.status == .exited(64) && run.lines.isEmpty, "\(command): \(run.lines) \(err)")
            #expect(err.contains("\(what) is not valid UTF-8 (badId)"), "\(err)")
        }
        let named = try json(["team", "\u{FFFD}", "--store", store, "--json"])
        #expect(named["name"]?.stringValue == "R")
    }

    /// `--store` naming a file: every command says it is a file, not a store, and leaves it as it was (the
    /// readers advised "`teamlog ingest --store FILE` creates one", which then failed on "Not a directory").
    @Test(arguments: [
        ["team", "t"], ["status"], ["audit"], ["repair"], ["compact"], ["log"], ["ingest", "-"], ["backup", "--to", "copy"],
    ])
    func aStorePathThatIsAFileIsNamedSo(command: [String]) throws {
        let directory = TemporaryDirectory("store-file")
        let file = directory.child("ops.jsonl")
        let content = Array(#"{"op":"client.login","actor":"x","device":"d"}"#.utf8) + [0x0A]
        try CrashSafetyTests.writeFile(file, content)
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, command + ["--store", file], stderr: directory.child("err"),
            timeout: 60)
        let err = readTextFile(directory.child("err"))
        #expect(run.status == .exited(1), "\(command): \(err)")
        #expect(err.contains("is a file, not a teamlog store"), "\(command): \(err)")
        #expect(readTextFile(file) == String(decoding: content, as: UTF8.self), "the file is untouched")
    }

    /// `teamlog demo` runs in a temporary store under `$TMPDIR` and removes it, projections directory and
    /// all (it used to leave the directory behind: its store has a subdirectory).
    @Test func theDemoLeavesNothingBehind() throws {
        let directory = TemporaryDirectory("demo")
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["demo", "--ops", "2000"], environment: ["TMPDIR": directory.path],
            timeout: 120)
        #expect(run.status == .exited(0))
        #expect(!run.lines.isEmpty)
        let dir = try #require(opendir(directory.path))
        var left: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { left.append(name) }
        }
        closedir(dir)
        #expect(left.isEmpty, "left behind: \(left)")
    }

    /// `teamlog demo --store PATH` (SPEC §5: every command takes `--store`) makes its store there and keeps
    /// it, a store that audits clean; `$TEAMLOG_STORE` alone does not make the demo write the default store.
    @Test func theDemoKeepsItsStoreAtStore() throws {
        let directory = TemporaryDirectory("demo-store")
        let path = directory.child("kept")
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["demo", "--ops", "1000", "--store", path],
            environment: ["TMPDIR": directory.path, "TEAMLOG_STORE": directory.child("default")], timeout: 120)
        #expect(run.status == .exited(0))
        #expect(access(directory.child("default"), F_OK) != 0, "the default store is not the demo's")
        let audit = try ChildProcess.run(TestSupport.teamlogExecutable, ["audit", "--store", path], timeout: 120)
        #expect(audit.status == .exited(0) && audit.lines.last == "audit OK", "\(audit.lines)")
    }

    @Test func messagesExampleThroughEveryQuery() throws {
        let dir = TemporaryDirectory()
        let store = dir.child("store")
        let (status, records) = try run(["ingest", Self.examples + "/messages.jsonl", "--store", store])
        #expect(status == .exited(0))
        let parsed = try Self.records(records)
        #expect(parsed.filter { $0["kind"]?.stringValue == "event" }.count == 13)
        #expect(
            parsed.filter { $0["kind"]?.stringValue == "rejected" }.map {
                "\($0["line"]?.intValue ?? 0):\($0["code"]?.stringValue ?? "?")"
            } == ["14:duplicateMessageId", "15:notPermitted"])
        #expect(
            parsed.filter { $0["kind"]?.stringValue == "delivery" }.map { $0["messageId"]?.stringValue ?? "?" }
                == ["tip-1", "tip-2", "m1", "m2", "m3", "p1", "s1"], "a delivery per message and tip")
        #expect(parsed.filter { $0["kind"]?.stringValue == "tip" }.count == 2)
        #expect(parsed.filter { $0["kind"]?.stringValue == "login" }.count == 1)
        #expect(parsed.count == 25, "no other record")

        let team = try json(["team", "ops", "--json", "--store", store])
        #expect(team["owner"]?.stringValue == "alice")
        #expect(team["memberCount"]?.intValue == 4)
        let dave = try json(["unread", "dave", "--json", "--store", store])
        #expect(dave["total"]?.intValue == 1)
        let receipts = try json(["receipts", "m1", "--json", "--store", store])
        #expect(
            receipts.jsonString
                == #"{"messageId":"m1","read":1,"unread":2,"readUsers":["bob"],"unreadUsers":["alice","dave"]}"#)
        let before = try json(["receipts", "m1", "--json", "--at", "8", "--store", store])
        #expect(before["read"]?.intValue == 0)
        // `--at` answers from a scratch store under $TMPDIR, removed afterwards (also when it fails).
        let scratchRoot = dir.child("tmp")
        #expect(mkdir(scratchRoot, 0o755) == 0)
        let (atStatus, atLines) = try ChildProcess.run(
            Self.exe, ["unread", "dave", "--json", "--at", "7", "--store", store], environment: ["TMPDIR": scratchRoot],
            timeout: 60)
        #expect(atStatus == .exited(0))
        #expect(
            atLines == [
                #"{"user":"dave","total":3,"conversations":[{"to":{"type":"team","id":"ops"},"unread":3,"lastReadSeq":0,"lastMessage":{"seq":7,"messageId":"m3"}}]}"#
            ])
        let (pastEnd, _) = try ChildProcess.run(
            Self.exe, ["unread", "dave", "--at", "99", "--store", store], environment: ["TMPDIR": scratchRoot],
            timeout: 60)
        #expect(pastEnd != .exited(0), "the log ends before seq 99")
        #expect(try directoryEntries(scratchRoot).isEmpty, "scratch stores removed")
        let message = try json(["message", "m1", "--store", store])
        #expect(message["hasChanged"]?.boolValue == true)
        #expect(try json(["message", "m1", "--json", "--store", store]) == message, "--json, like every query")
        // As of seq 5, when it was sent and not yet modified; at seq 4 it was not there.
        #expect(try json(["message", "m1", "--at", "5", "--store", store])["hasChanged"]?.boolValue == false)
        #expect(try run(["message", "m1", "--at", "4", "--store", store]).0 == .exited(1))

        #expect(try run(["team", "nope", "--store", store]).0 == .exited(1))
        #expect(try run(["receipts", "nope", "--store", store]).0 == .exited(1))
        #expect(try run(["team", "ops", "--store", dir.child("missing")]).0 != .exited(0))
        #expect(try run(["audit", "--store", store]).0 == .exited(0))
    }

    /// `audit --cache-mb` is the replay's budget, as `--json` reports it: 1 MiB is passed by the messages of
    /// a 10,000-op history (an estimated 320 bytes each) at the replay's first look at it (8,192 events), so
    /// its working set is evicted wholesale; the default's holds it all; both find the same tables.
    @Test func auditCacheMbIsTheReplaysBudget() throws {
        let dir = TemporaryDirectory()
        let store = dir.child("store")
        let input = dir.child("ops.jsonl")
        try CheckpointTests.writeLines(input, WorkingSetTests.mixedLines(count: 10_000, seed: 38))
        #expect(try run(["ingest", input, "--store", store, "--emit", "none"]).0 == .exited(0))
        let tight = try json(["audit", "--store", store, "--json", "--cache-mb", "1"])
        #expect(tight["ok"]?.boolValue == true)
        #expect(tight["replay"]?["budgetBytes"]?.intValue == 1 << 20)
        #expect((tight["replay"]?["sweeps"]?.intValue ?? 0) >= 1, "\(tight["replay"].map { "\($0)" } ?? "no replay")")
        let standard = try json(["audit", "--store", store, "--json"])
        #expect(standard["replay"]?["budgetBytes"]?.intValue.map(Int.init) == Store.defaultReplayCacheBytes)
        #expect(standard["replay"]?["sweeps"]?.intValue == 0)
        #expect(standard["tables"] == tight["tables"], "the budget changes how, not what")

        // A rebuild through the same budget: evicted wholesale, and the rebuilt store audits as before.
        let (repaired, lines) = try run(["repair", "--store", store, "--cache-mb", "1"])
        #expect(repaired == .exited(0), "\(lines)")
        let replay = try #require(lines.last { $0.hasPrefix("replay: ") }, "\(lines)")
        #expect(replay.hasSuffix("(a budget of 1 MiB)") && !replay.contains("(0 wholesale)"), "\(replay)")
        let after = try json(["audit", "--store", store, "--json"])
        #expect(after["ok"]?.boolValue == true && after["tables"] == standard["tables"])
    }

    @Test func callExampleAndChannelQuery() throws {
        let dir = TemporaryDirectory()
        let store = dir.child("store")
        let (status, records) = try run(["ingest", Self.examples + "/call.jsonl", "--store", store])
        #expect(status == .exited(0))
        let signals = try Self.records(records).filter { $0["kind"]?.stringValue == "signal" }
        #expect(
            signals.map {
                "\($0["seq"]?.intValue ?? 0) \($0["event"]?.stringValue ?? "?")>\($0["to"]?.stringValue ?? "?")"
            } == ["4 invite>bob", "7 accept>alice", "7 join>alice", "7 accept>bob", "11 membersSync>alice"])
        let channel = try json(["channel", "call1", "--json", "--store", store])
        #expect(
            channel.jsonString
                == #"{"channel":"call1","kind":"video","closed":false,"members":["alice"],"pendingInvites":[]}"#)
        let earlier = try json(["channel", "call1", "--json", "--at", "7", "--store", store])
        #expect(earlier["members"] == .array([.string("alice"), .string("bob")]))
    }

    /// SPEC §4: `--emit all|events|none` chooses what is printed; the store is the same whichever is chosen.
    @Test func emitModesPrintLessAndStoreTheSame() throws {
        let dir = TemporaryDirectory()
        // Every op with its own `ts`, so the three stores do not differ by the processor's clock.
        let source = dir.child("source")
        #expect(
            try run(["ingest", Self.examples + "/messages.jsonl", "--store", source, "--emit", "none"]).0 == .exited(0))
        let timed = dir.child("timed.jsonl")
        let fd = open(timed, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        let text =
            try run(["log", "--store", source]).1.joined(separator: "\n") + "\n{\"op\":\"team.fly\",\"actor\":\"a\"}\n"
        _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        var digests: [[String]] = []
        var printed: [String: [String]] = [:]
        for mode in ["all", "events", "none"] {
            let store = dir.child(mode)
            let (status, lines) = try run(["ingest", timed, "--store", store, "--emit", mode])
            #expect(status == .exited(0))
            printed[mode] = try Self.records(lines).compactMap { $0["kind"]?.stringValue }
            let (auditStatus, audit) = try run(["audit", "--store", store])
            #expect(auditStatus == .exited(0))
            digests.append(audit.filter { $0.hasSuffix("OK") && !$0.hasPrefix("audit") && !$0.hasPrefix("chain") })
        }
        #expect(Set(printed["all"]!).isSuperset(of: ["event", "tip", "delivery", "rejected"]))
        #expect(Set(printed["events"]!) == ["event", "rejected"])
        #expect(printed["events"]!.count == printed["all"]!.filter { $0 == "event" || $0 == "rejected" }.count)
        #expect(printed["none"]!.isEmpty)
        #expect(digests[0] == digests[1] && digests[1] == digests[2] && !digests[0].isEmpty)
    }

    /// `audit` and `repair` shorten jemalloc's decay of freed pages (10 s → 1 s) at run time; other
    /// commands keep its defaults. Read from jemalloc's own statistics, printed at exit
    /// (`MALLOC_CONF=stats_print:true`; the executables link jemalloc, the test binary does not).
    @Test func auditAndRepairReturnFreedPagesSooner() throws {
        let dir = TemporaryDirectory()
        let store = dir.child("store")
        #expect(
            try run(["ingest", Self.examples + "/messages.jsonl", "--store", store, "--emit", "none"]).0 == .exited(0))
        func decaySetting(_ args: [String]) throws -> String? {
            let stats = dir.child("stats-\(args[0])")
            let run = try ChildProcess.run(
                Self.exe, args, environment: ["MALLOC_CONF": "stats_print:true"], stderr: stats, timeout: 60)
            #expect(run.status == .exited(0), "\(args)")
            let text = try String(contentsOfFile: stats, encoding: .utf8)
            // "  opt.dirty_decay_ms: 10000 (arenas.dirty_decay_ms: 1000)"
            guard let line = text.split(separator: "\n").first(where: { $0.contains("opt.dirty_decay_ms") }) else {
                return nil
            }
            return line.split(separator: "(").last.map { String($0.dropLast()) }
        }
        #expect(try decaySetting(["audit", "--store", store]) == "arenas.dirty_decay_ms: 1000")
        #expect(try decaySetting(["repair", "--store", store]) == "arenas.dirty_decay_ms: 1000")
        #expect(try decaySetting(["status", "--store", store]) == "arenas.dirty_decay_ms: 10000")
    }

    @Test func exportedLogRebuildsAnEqualStore() throws {
        let dir = TemporaryDirectory()
        let a = dir.child("a")
        let b = dir.child("b")
        for file in ["messages.jsonl", "call.jsonl"] {
            #expect(try run(["ingest", Self.examples + "/" + file, "--store", a, "--emit", "none"]).0 == .exited(0))
        }
        let (status, lines) = try run(["log", "--store", a])
        #expect(status == .exited(0))
        let exported = dir.child("log.jsonl")
        let text = lines.joined(separator: "\n") + "\n"
        let fd = open(exported, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        _ = Array(text.utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
        #expect(try run(["ingest", exported, "--store", b, "--emit", "none"]).0 == .exited(0))
        #expect(try run(["audit", "--store", b]).0 == .exited(0))
        for user in ["alice", "bob", "carol", "dave"] {
            #expect(
                try json(["unread", user, "--json", "--store", a]) == json(["unread", user, "--json", "--store", b]))
        }
        #expect(try json(["team", "ops", "--json", "--store", a]) == json(["team", "ops", "--json", "--store", b]))
        #expect(
            try json(["channel", "call1", "--json", "--store", a])
                == json(["channel", "call1", "--json", "--store", b]))
        let teamOnly = try run(["log", "--store", a, "--team", "ops"]).1
        #expect(!teamOnly.isEmpty && teamOnly.allSatisfy { !$0.contains("channel.") && !$0.contains("client.") })
        let window = try run(["log", "--store", a, "--from", "5", "--to", "6"]).1
        #expect(window.count == 2)
    }

    /// Issue 10 §5 end to end: a rejected op reaching a members-sync deadline stores the removal as a system
    /// event; `teamlog log` exports it as the `clock.tick` that repeats it, so the rebuilt store has the
    /// same seqs and audits equal.
    @Test func systemMembersSyncIsExportedAndRebuilt() throws {
        let dir = TemporaryDirectory()
        let a = dir.child("a")
        let b = dir.child("b")
        let input = [
            #"{"op":"client.login","actor":"alice","device":"a1","ts":1000}"#,
            #"{"op":"client.login","actor":"bob","device":"b1","ts":1000}"#,
            #"{"op":"channel.create","actor":"alice","channel":"c1","kind":"audio","ts":1001}"#,
            #"{"op":"channel.join","actor":"alice","channel":"c1","ts":1002}"#,
            #"{"op":"channel.join","actor":"bob","channel":"c1","ts":1003}"#,
            #"{"op":"client.logout","actor":"bob","device":"b1","ts":2000}"#,
            #"{"op":"channel.control","actor":"bob","channel":"c1","data":"x","ts":122000}"#,
        ].joined(separator: "\n")
        let file = dir.child("in.jsonl")
        try CrashSafetyTests.writeFile(file, Array((input + "\n").utf8))
        let (status, lines) = try run(["ingest", file, "--store", a])
        #expect(status == .exited(0))
        #expect(
            Array(lines.suffix(2)) == [
                #"{"kind":"signal","seq":7,"channel":"c1","event":"membersSync","to":"alice","devices":["a1"],"stored":false,"sync":false,"members":["alice"]}"#,
                #"{"kind":"rejected","line":7,"opId":null,"code":"notMember","reason":"bob is not in channel c1"}"#,
            ])
        #expect(try json(["channel", "c1", "--json", "--store", a])["members"] == .array([.string("alice")]))
        #expect(try run(["audit", "--store", a]).0 == .exited(0))
        let exported = try run(["log", "--store", a]).1
        #expect(exported.count == 7)
        #expect(exported.last == #"{"op":"clock.tick","actor":"system","ts":122000}"#)
        let log = dir.child("log.jsonl")
        try CrashSafetyTests.writeFile(log, Array((exported.joined(separator: "\n") + "\n").utf8))
        let (rebuilt, again) = try run(["ingest", log, "--store", b])
        #expect(rebuilt == .exited(0))
        #expect(again.last == lines[lines.count - 2], "the same removal at the same seq")
        #expect(try run(["audit", "--store", b]).0 == .exited(0))
        #expect(try json(["channel", "c1", "--json", "--store", b]) == json(["channel", "c1", "--json", "--store", a]))
    }
}

#if canImport(Glibc)
    import Glibc
#endif

/// The names in a directory (without `.` and `..`): the store's own lister (`removeDirectoryTree` uses it).
private func directoryEntries(_ path: String) throws -> [String] {
    guard let names = TeamLogStore.directoryEntries(path) else { throw ChildProcessError("cannot list \(path)") }
    return names
}
