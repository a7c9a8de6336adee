import LMDB
import TeamLog
import TeamLogStore
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Hostile lines through a real `teamlog ingest`: every line gets exactly one record with the expected code
/// and its own line number, the run goes on to the end and exits 0, and every valid op among them is stored.
///
/// The corpus (`Corpus/hostile.jsonl`, one line per case, with `Corpus/hostile.expected` naming each line's
/// record) is written by `tools/make-hostile-corpus.py`: it holds raw bytes an editor would not keep (invalid
/// UTF-8, raw control characters, a BOM). The big cases — lines over and exactly at the 1 MiB limit, id lists
/// of 100,000 and 200,001 entries, nesting 100,000 deep, 60,000 keys — are generated here at run time.
@Suite struct HostileInputTests {
    /// One input line and the record it must get: `event`, `duplicate`, `-` (none) or a rejection code.
    struct Case: Sendable {
        var line: [UInt8]
        var expected: String
        var comment: String
    }

    static let corpusDirectory: String = {
        let file = "\(#filePath)"
        return String(file[..<(file.lastIndex(of: "/") ?? file.startIndex)]) + "/Corpus"
    }()

    /// The committed corpus with its expectations, line by line.
    static func corpus() throws -> [Case] {
        var bytes = try readBytes(corpusDirectory + "/hostile.jsonl")
        guard bytes.last == 0x0A else { throw StoreError("hostile.jsonl must end with a newline") }
        bytes.removeLast()
        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false).map(Array.init)
        let expectations = try readBytes(corpusDirectory + "/hostile.expected")
            .split(separator: 0x0A).map { String(decoding: $0, as: UTF8.self) }
        guard lines.count == expectations.count else {
            throw StoreError(
                "hostile.jsonl has \(lines.count) lines, hostile.expected \(expectations.count): regenerate both")
        }
        return zip(lines, expectations).map { line, text in
            let code = String(text.prefix { $0 != " " && $0 != "#" })
            let comment = text.firstIndex(of: "#").map { String(text[text.index(after: $0)...]) } ?? ""
            return Case(line: line, expected: code, comment: comment)
        }
    }

    static let mebibyte = 1 << 20

    /// The big cases, generated; the last one is left without its newline (it ends the input).
    static func generated() -> [Case] {
        func text(_ s: String) -> [UInt8] { Array(s.utf8) }
        /// `head`, then `fill` bytes, then `tail`, `total` bytes in all.
        func padded(_ head: String, _ fill: UInt8, _ tail: String, total: Int) -> [UInt8] {
            let h = text(head)
            let t = text(tail)
            return h + [UInt8](repeating: fill, count: total - h.count - t.count) + t
        }
        func ids(_ count: Int, _ id: (Int) -> String) -> String {
            (0..<count).map { "\"\(id($0))\"" }.joined(separator: ",")
        }
        let update = #"{"op":"team.update","actor":"giant","team":"big","fields":{"intro":""#
        var cases: [Case] = []
        cases.append(
            Case(
                line: text(
                    #"{"op":"team.create","actor":"giant","team":"big","name":"Big","ts":1767400000000,"opId":"g-1"}"#),
                expected: "event", comment: "setup: team big (a team: 2,000 members at most)"))
        cases.append(
            Case(
                line: padded(update, UInt8(ascii: "x"), #""},"ts":1767400001000,"opId":"g-2"}"#, total: 2 * mebibyte),
                expected: "lineTooLong", comment: "a 2 MiB line"))
        cases.append(
            Case(
                line: padded(update, UInt8(ascii: "y"), #""},"ts":1767400002000,"opId":"g-3"}"#, total: mebibyte),
                expected: "event", comment: "a valid line of exactly 1 MiB"))
        cases.append(
            Case(
                line: padded(update, UInt8(ascii: "z"), #""},"ts":1767400003000,"opId":"g-4"}"#, total: mebibyte + 1),
                expected: "lineTooLong", comment: "a line of 1 MiB + 1 byte"))
        cases.append(
            Case(
                line: padded(
                    #"{"op":"team.update","actor":"giant","team":"big","fields":{"announcement":""#, UInt8(ascii: "v"),
                    #""},"ts":1767400003500,"opId":"g-4b"}"#, total: mebibyte) + [0x0D],
                expected: "event", comment: "a valid line of exactly 1 MiB ended by CRLF (the CR is no content)"))
        cases.append(
            Case(
                line: text(
                    #"{"op":"team.invite","actor":"giant","team":"big","ts":1767400004000,"opId":"g-5","targets":["#
                        + ids(100_000) { "x\($0)" } + "]}"),
                expected: "teamFull", comment: "100,000 valid ids invited into a team (2,000 at most)"))
        cases.append(
            Case(
                line: text(
                    #"{"op":"team.invite","actor":"giant","team":"big","ts":1767400005000,"opId":"g-6","targets":["#
                        + ids(200_001) { _ in "a" } + "]}"),
                expected: "badField", comment: "a list of 200,001 ids (200,000 at most)"))
        cases.append(
            Case(
                line: text(
                    #"{"op":"team.invite","actor":"giant","team":"big","ts":1767400006000,"opId":"g-7","targets":["#
                        + ids(200_000) { _ in "a" } + "]}"),
                expected: "event", comment: "a list of exactly 200,000 ids (one id, merged)"))
        cases.append(
            Case(
                line: text(#"{"op":"team.create","actor":"giant","team":"deep","ts":1767400007000,"x":"#)
                    + [UInt8](repeating: UInt8(ascii: "["), count: 100_000)
                    + [UInt8](repeating: UInt8(ascii: "]"), count: 100_000)
                    + text("}"),
                expected: "badJSON", comment: "arrays nested 100,000 deep"))
        let keys = (0..<60_000).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        cases.append(
            Case(
                line: text(
                    #"{"op":"team.create","actor":"giant","team":"keys","ts":1767400008000,"opId":"g-8","#
                        + keys + "}"),
                expected: "event", comment: "60,000 ignored keys"))
        cases.append(
            Case(
                line: text(
                    #"{"op":"team.create","actor":"giant","team":"keys2","ts":1767400009000,"#
                        + keys + #","k0":1}"#),
                expected: "badJSON", comment: "60,000 keys, the first repeated at the end"))
        cases.append(
            Case(
                line: text(
                    #"{"op":"team.update","actor":"giant","team":"big","fields":{"name":""#
                        + String(repeating: #"\u00e9"#, count: 100_000) + #""},"ts":1767400010000,"opId":"g-9"}"#),
                expected: "event", comment: "a name of 100,000 escapes"))
        cases.append(
            Case(
                line: text(#"{"op":"team.create","actor":"giant","team":"after","ts":1767400011000,"opId":"g-10"}"#),
                expected: "event", comment: "a valid op after the big ones"))
        cases.append(
            Case(
                line: padded(update, UInt8(ascii: "w"), #""}}"#, total: 3 * mebibyte),
                expected: "lineTooLong", comment: "a 3 MiB last line without a newline"))
        return cases
    }

    /// Corpus and big cases as one input; the last line has no newline.
    static func input(_ cases: [Case]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(cases.reduce(0) { $0 + $1.line.count + 1 })
        for (i, c) in cases.enumerated() {
            bytes += c.line
            if i < cases.count - 1 { bytes.append(0x0A) }
        }
        return bytes
    }

    // MARK: Tests

    @Test func corpusMatchesItsExpectations() throws {
        let corpus = try Self.corpus()
        #expect(corpus.count >= 150)
        let known = Set(["event", "duplicate", "-"] + RejectionCode.allCases.map(\.rawValue))
        for (i, c) in corpus.enumerated() {
            #expect(known.contains(c.expected), "line \(i + 1): unknown expectation \(c.expected)")
            if c.expected == "event" {
                let opId = try? JSONParser.parse(c.line)["opId"]?.stringValue
                #expect(opId != nil, "line \(i + 1) (\(c.comment)): a valid corpus op needs an opId")
            }
        }
        let opIds = corpus.filter { $0.expected == "event" }.compactMap {
            try? JSONParser.parse($0.line)["opId"]?.stringValue
        }
        #expect(Set(opIds).count == opIds.count, "valid corpus ops have distinct opIds")
    }

    @Test func hostileLinesThroughIngest() throws {
        let generated = Self.generated()
        let cases = try Self.corpus() + generated
        let directory = TemporaryDirectory("hostile")
        let file = directory.child("hostile.jsonl")
        try CrashSafetyTests.writeFile(file, Self.input(cases))
        let storePath = directory.child("store")
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", storePath],
            stderr: directory.child("ingest.err"), timeout: 300)
        try Self.check(
            cases, output: run.lines, status: run.status,
            stderr: CrashSafetyTests.readText(directory.child("ingest.err")), storePath: storePath)
        print(
            "hostile inputs tried: \(cases.count) lines (\(cases.count - generated.count) from the corpus, \(generated.count) generated)"
        )
    }

    @Test func hostileLinesThroughAStreamingIngest() throws {
        let cases = try Self.corpus() + Self.generated()
        let directory = TemporaryDirectory("hostile-stream")
        let storePath = directory.child("store")
        let errPath = directory.child("ingest.err")
        let feed = try LiveFeed(.fifo, path: directory.child("in.fifo"))
        let child = try ChildProcess(
            TestSupport.teamlogExecutable,
            ["ingest", "-", "--store", storePath, "--follow", "--batch-size", "7", "--emit", "events"],
            stdin: feed.stdin, stderr: errPath)
        let bytes = Self.input(cases)
        let written = try feed.pump(bytes, from: 0, to: bytes.count, chunk: 1 << 15, draining: child)
        feed.close()  // the end of the input ends the stream
        let ended = (try? child.readToEnd(timeout: 120)) != nil
        if !ended { child.kill(SIGKILL) }
        let status = child.wait()
        #expect(written == bytes.count, "the child stopped reading after \(written) of \(bytes.count) bytes")
        #expect(ended, "the stream did not end within 120 s of its input's end")
        try Self.check(
            cases, output: child.lines, status: status, stderr: CrashSafetyTests.readText(errPath),
            storePath: storePath)
    }

    /// Event times are integers from 0 to the end of year 9999; one at that end must not crash the run
    /// (members sync adds the timeout to a join time), and one past it (Int64.max included) is `badField`
    /// rather than pinning event time there forever.
    @Test func eventTimeAtTheEndOfYear9999DoesNotCrashTheRun() throws {
        let lines = [
            #"{"op":"team.create","actor":"o","team":"late","ts":1767225600000,"opId":"t-1"}"#,
            #"{"op":"channel.create","actor":"o","channel":"ch","ts":253402300799999,"opId":"t-2"}"#,
            #"{"op":"channel.join","actor":"o","channel":"ch","opId":"t-3"}"#,
            #"{"op":"client.login","actor":"p","device":"d1","opId":"t-4"}"#,
            #"{"op":"channel.join","actor":"p","channel":"ch","device":"d1","opId":"t-5"}"#,
            #"{"op":"client.logout","actor":"p","device":"d1","opId":"t-6"}"#,
            #"{"op":"clock.tick","actor":"o","opId":"t-7"}"#,
            #"{"op":"team.update","actor":"o","team":"late","fields":{"intro":"after"},"opId":"t-8"}"#,
        ]
        let past = [
            #"{"op":"clock.tick","actor":"o","ts":9223372036854775807,"opId":"t-9"}"#,
            #"{"op":"clock.tick","actor":"o","ts":253402300800000,"opId":"t-10"}"#,
            #"{"op":"clock.tick","actor":"o","ts":-1,"opId":"t-11"}"#,
        ]
        let cases =
            lines.enumerated().map {
                Case(line: Array($0.element.utf8), expected: "event", comment: "line \($0.offset + 1)")
            }
            + past.enumerated().map {
                Case(line: Array($0.element.utf8), expected: "badField", comment: "line \($0.offset + 9)")
            }
        let directory = TemporaryDirectory("hostile-time")
        let file = directory.child("late.jsonl")
        try CrashSafetyTests.writeFile(file, Self.input(cases) + [0x0A])
        let run = try ChildProcess.run(
            TestSupport.teamlogExecutable, ["ingest", file, "--store", directory.child("store"), "--emit", "events"],
            stderr: directory.child("ingest.err"), timeout: 60)
        try Self.check(
            cases, output: run.lines, status: run.status,
            stderr: CrashSafetyTests.readText(directory.child("ingest.err")), storePath: directory.child("store"))
    }

    // MARK: Checking a run

    /// Checks one ingest run of `cases` (line n = cases[n - 1]) and the store it wrote.
    static func check(
        _ cases: [Case], output: [String], status: ChildProcess.Status, stderr: String,
        storePath: String
    ) throws {
        #expect(status == .exited(0), "ingest \(status): \(stderr.prefix(1_000))")
        var byLine: [Int: [JSONValue]] = [:]
        var counts = (events: 0, rejected: 0, duplicates: 0)
        for (i, text) in output.enumerated() {
            guard let record = try? JSONParser.parse(text), record["kind"]?.stringValue != nil else {
                Issue.record("output line \(i + 1) is not a JSON record: \(text.prefix(300))")
                continue
            }
            guard let line = record["line"]?.intValue else { continue }  // tips, deliveries, notices
            byLine[Int(line), default: []].append(record)
            switch record["kind"]?.stringValue {
            case "event": counts.events += 1
            case "rejected": counts.rejected += 1
            case "duplicate": counts.duplicates += 1
            default: Issue.record("a record with a line number of kind \(record["kind"]!.jsonString)")
            }
        }
        var mismatches: [String] = []
        for (i, c) in cases.enumerated() {
            let records = byLine[i + 1] ?? []
            let got = records.map { r in
                r["kind"]?.stringValue == "rejected" ? r["code"]?.stringValue ?? "?" : r["kind"]?.stringValue ?? "?"
            }
            if got != (c.expected == "-" ? [] : [c.expected]) {
                let reasons = records.compactMap { $0["reason"]?.stringValue.map { String($0.prefix(120)) } }
                mismatches.append("line \(i + 1) (\(c.comment)): expected \(c.expected), got \(got) \(reasons)")
            }
            // A rejection names the line's opId when it can be read as a valid id (not from a line too long
            // to parse), and null otherwise.
            if let record = records.first, record["kind"]?.stringValue == "rejected" {
                var opId: JSONValue = .null
                if c.expected != "lineTooLong", case .string(let id)? = (try? JSONParser.parse(c.line))?["opId"],
                    Ids.problem(id) == nil
                {
                    opId = .string(id)
                }
                if record["opId"] != opId {
                    let named = record["opId"]?.jsonString ?? "nothing"
                    mismatches.append(
                        "line \(i + 1) (\(c.comment)): rejection names opId \(named), not \(opId.jsonString)")
                }
            }
        }
        #expect(
            mismatches.isEmpty,
            "\(mismatches.count) lines without their expected record:\n\(mismatches.prefix(25).joined(separator: "\n"))"
        )
        #expect(Set(byLine.keys).isSubset(of: Set(1...cases.count)), "records name lines that do not exist")
        let lastAnswered = cases.indices.last { cases[$0].expected != "-" }.map { $0 + 1 }
        #expect(byLine.keys.max() == lastAnswered, "the run answered every line to the end")
        #expect(
            stderr.contains("accepted \(counts.events), rejected \(counts.rejected), duplicates \(counts.duplicates),"),
            "summary: \(stderr.prefix(300))")

        // Nothing valid was lost: every accepted line's opId is in the log at the seq it was printed with.
        let store = try Store(path: storePath)
        defer { store.close() }
        let audit = try store.audit()
        #expect(audit.ok, "\(audit)")
        #expect(try store.head().seq == UInt64(counts.events))
        for (i, c) in cases.enumerated() where c.expected == "event" || c.expected == "duplicate" {
            guard let record = byLine[i + 1]?.first, let seq = record["seq"]?.intValue else { continue }
            let opId = try? JSONParser.parse(c.line)["opId"]?.stringValue
            guard let opId else {
                Issue.record("line \(i + 1) (\(c.comment)) has no opId to look up")
                continue
            }
            #expect(try store.seqOf(opId: Id(opId)) == UInt64(seq), "line \(i + 1) (\(c.comment)) is stored as seq \(seq)")
            #expect(try store.event(at: UInt64(seq))?.op.opId == Id(opId))
        }
        // Spot checks of what the big and boundary lines stored.
        if let exact = cases.firstIndex(where: { $0.comment == "a valid line of exactly 1 MiB" }),
            byLine[exact + 1]?.first?["kind"]?.stringValue == "event"
        {
            let intro = try store.teamView("big")?["intro"]?.stringValue
            let written = cases[exact].line.count { $0 == UInt8(ascii: "y") }
            #expect(intro?.utf8.count == written, "the 1 MiB line's intro is stored whole")
        }
        if let crlf = cases.firstIndex(where: { $0.comment.hasPrefix("a valid line of exactly 1 MiB ended by CRLF") }),
            byLine[crlf + 1]?.first?["kind"]?.stringValue == "event"
        {
            let announcement = try store.teamView("big")?["announcement"]?.stringValue
            let written = cases[crlf].line.count { $0 == UInt8(ascii: "v") }
            #expect(announcement?.utf8.count == written, "the CRLF line's announcement is stored whole, without CR")
        }
        if cases.contains(where: { $0.comment == "team id of exactly 128 bytes" }) {
            #expect(try store.teamView(Id(String(repeating: "i", count: 128))) != nil)
            #expect(try store.teamView(Id(String(repeating: "\u{E9}", count: 64))) != nil)
            #expect(try store.teamView(Id(String(repeating: "\u{1F600}", count: 32))) != nil)
            #expect(try store.teamView("h1")?["name"]?.stringValue == "nul\u{0}name\u{1B}[31m")
            #expect(try store.teamView("hesc") != nil, "an op name spelled with an escape is that op")
        }
    }

    static func readBytes(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError("cannot open \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
            guard n >= 0 else { throw StoreError("cannot read \(path): \(String(cString: strerror(errno)))") }
            if n == 0 { return out }
            out += chunk[0..<n]
        }
    }
}
