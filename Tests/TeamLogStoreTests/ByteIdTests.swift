import TeamLog
import TeamLogStore
import TeamLogWorkload
import TestSupport
import Testing

/// SPEC §1: an id is its UTF-8 bytes. Canonically equivalent Unicode (`café` precomposed and decomposed)
/// is two ids everywhere — decide, apply, fan-out, opIds, stored keys, queries — wherever run boundaries
/// fall (issue 10 §1: Swift's `String` equality made them one id in memory and two on disk).
@Suite struct ByteIdTests {
    static let nfc = "caf\u{E9}"  // caf\xc3\xa9
    static let nfd = "cafe\u{301}"  // cafe\xcc\x81

    @Test func canonicallyEquivalentStringsAreDistinctIds() {
        #expect(Self.nfc == Self.nfd, "Swift's String equality is canonical equivalence (the premise)")
        #expect(Id(Self.nfc) != Id(Self.nfd))
        #expect(Set([Id(Self.nfc), Id(Self.nfd)]).count == 2)
        #expect(Id(Self.nfc) < Id(Self.nfd) || Id(Self.nfd) < Id(Self.nfc))
        #expect(Id(Self.nfc) == Id(String(decoding: Array(Self.nfc.utf8), as: UTF8.self)))
        // The p2p key does not depend on which side names it.
        let a = ConvKey(p2p: Id(Self.nfc), Id(Self.nfd))
        let b = ConvKey(p2p: Id(Self.nfd), Id(Self.nfc))
        #expect(a == b && a.bytes == b.bytes)
        #expect(a.pair.map { [$0.0, $0.1] } == [Id(Self.nfd), Id(Self.nfc)].sorted())
    }

    /// The issue's reproduction: a team created as NFC and updated as NFD.
    static let teamLines = [
        #"{"op":"team.create","actor":"alice","team":"caf\#u{E9}","members":["bob"],"ts":1000}"#,
        #"{"op":"team.update","actor":"alice","team":"cafe\#u{301}","fields":{"name":"X"},"ts":1001}"#,
    ]

    @Test func aTeamIdInNFDIsNotTheTeamInNFC() throws {
        let h = try StoreHarness()
        let records = try h.feed(Self.teamLines)
        #expect(records.compactMap { $0["code"]?.stringValue } == ["noSuchTeam"])
        #expect(try h.team(Id(Self.nfc))?["name"]?.stringValue == "")
        #expect(try h.team(Id(Self.nfd)) == nil)
        // Creating the NFD team is a new team, not `teamExists`.
        let created = try h.feed(#"{"op":"team.create","actor":"zed","team":"cafe\#u{301}","ts":1002}"#)
        #expect(created.first?["kind"]?.stringValue == "event")
        #expect(try h.team(Id(Self.nfd))?["owner"]?.stringValue == "zed")
        #expect(try h.store.audit().ok)
    }

    @Test(arguments: [1, 2])
    func splittingRunsChangesNothing(_ runs: Int) throws {
        let whole = try StoreHarness()
        try whole.feed(Self.teamLines)
        let split = try StoreHarness()
        for line in Self.teamLines {
            try split.feed(line)
            if runs == 2 { try split.reopen() }
        }
        #expect(try split.store.audit().ok)
        #expect(try digests(whole) == digests(split))
    }

    @Test func opIdsInNFCAndNFDAreTwoKeysInOneBatchAndAcrossRuns() throws {
        func line(_ team: String, _ opId: String) -> String {
            op("team.create", "alice", ["team": team, "opId": opId, "ts": 1000])
        }
        let h = try StoreHarness()
        let one = try h.feed([line("t1", "op-\(Self.nfc)"), line("t2", "op-\(Self.nfd)")])
        #expect(one.filter { $0["kind"]?.stringValue == "event" }.count == 2)
        try h.reopen()
        let again = try h.feed([line("t1", "op-\(Self.nfc)"), line("t2", "op-\(Self.nfd)")])
        #expect(again.map { $0["kind"]?.stringValue } == ["duplicate", "duplicate"])
        #expect(again.map { $0["seq"]?.intValue } == [1, 2])
        #expect(try h.store.seqOf(opId: Id("op-\(Self.nfd)")) == 2)
    }

    @Test func aMemberSendingUnderTheOtherFormIsNotTheMember() throws {
        let h = try StoreHarness()
        try h.feed(op("team.create", "own", ["team": "t1", "members": [Self.nfc, "b"], "ts": 1000]))
        let sent = try h.feed(
            op(
                "message.send", Self.nfd,
                [
                    "to": ["type": "team", "id": "t1"] as KeyValuePairs<String, Any>, "messageId": "m1",
                    "content": ["type": "text"] as KeyValuePairs<String, Any>, "ts": 1001,
                ]))
        #expect(sent.first?["code"]?.stringValue == "notMember")
        try h.feed(
            op(
                "message.send", "b",
                [
                    "to": ["type": "team", "id": "t1"] as KeyValuePairs<String, Any>, "messageId": "m2",
                    "content": ["type": "text"] as KeyValuePairs<String, Any>, "ts": 1002,
                ]))
        #expect(try h.store.unreadView(Id(Self.nfc))["total"]?.intValue == 1)
        #expect(try h.store.unreadView(Id(Self.nfd))["total"]?.intValue == 0)
    }

    /// Property: ops over ids drawn from groups of canonically equivalent spellings behave exactly like
    /// the same ops with each spelling renamed to a plain ASCII id — same record kinds and codes line by
    /// line, same counts of members and unread — and a run split at random reopens gives the same tables.
    @Test(arguments: [1, 2, 3, 4])
    func equivalentSpellingsBehaveAsUnrelatedIds(_ seed: UInt64) throws {
        let spellings = [
            "caf\u{E9}", "cafe\u{301}",  // é precomposed / decomposed
            "\u{C5}", "A\u{30A}", "\u{212B}",  // Å, A + ring, ANGSTROM SIGN (normalizes to Å)
            "\u{1E69}", "s\u{323}\u{307}", "s\u{307}\u{323}",  // ṩ in three orders of its marks
            "\u{FB01}", "fi",  // compatibility only: distinct under every normalization but NFKC
        ]
        let ascii = spellings.indices.map { "x\($0)" }
        var rng = SplitMix64(seed: seed)
        var lines: [(Int) -> String] = []  // each line, given a naming (0: spellings, 1: ascii)
        func name(_ i: Int, _ naming: Int) -> String { naming == 0 ? spellings[i] : ascii[i] }
        var ts = 1000
        for n in 0..<200 {
            ts += 1
            let t = ts
            let actor = Int.random(in: 0..<spellings.count, using: &rng)
            let team = Int.random(in: 0..<spellings.count, using: &rng)
            let other = Int.random(in: 0..<spellings.count, using: &rng)
            let opId = rng.chance(0.3) ? Int.random(in: 0..<spellings.count, using: &rng) : nil
            let kind = Int.random(in: 0..<6, using: &rng)
            lines.append { naming in
                var fields: [(String, Any)] = [("ts", t)]
                let conv = ["type": "team", "id": name(team, naming)] as KeyValuePairs<String, Any>
                let opName: String
                switch kind {
                case 0:
                    opName = "team.create"
                    fields += [("team", name(team, naming)), ("members", [name(other, naming)]), ("joinMode", "free")]
                case 1:
                    opName = "team.apply"
                    fields += [("team", name(team, naming))]
                case 2:
                    opName = "team.kick"
                    fields += [("team", name(team, naming)), ("targets", [name(other, naming)])]
                case 3:
                    opName = "message.send"
                    fields += [
                        ("to", conv), ("messageId", "m\(n % 150)-" + name(other, naming)),
                        ("content", ["type": "text"] as KeyValuePairs<String, Any>),
                    ]
                case 4:
                    opName = "message.read"
                    fields += [("to", conv)]
                default:
                    opName = "team.leave"
                    fields += [("team", name(team, naming))]
                }
                if let opId { fields.append(("opId", "o-" + name(opId, naming))) }
                var pairs: [(String, JSONValue)] = [("op", .string(opName)), ("actor", .string(name(actor, naming)))]
                pairs += fields.map { ($0.0, jsonValue($0.1)) }
                return JSONValue.object(pairs).jsonString
            }
        }
        func outcomes(_ records: [JSONValue]) -> [String] {
            records.compactMap { r -> String? in
                guard let kind = r["kind"]?.stringValue, ["event", "rejected", "duplicate"].contains(kind) else {
                    return nil
                }
                return "\(r["line"]?.intValue ?? 0):\(kind):\(r["code"]?.stringValue ?? "")"
            }
        }
        let withSpellings = try StoreHarness()
        let plain = try StoreHarness()
        let split = try StoreHarness()
        let a = try withSpellings.feed(lines.map { $0(0) })
        let b = try plain.feed(lines.map { $0(1) })
        #expect(outcomes(a) == outcomes(b), "seed \(seed)")
        #expect(outcomes(a).contains { $0.hasSuffix(":event:") })
        for (i, line) in lines.enumerated() {
            try split.feed(line(0))
            if rng.chance(0.1) || i == lines.count / 2 { try split.reopen() }
        }
        #expect(try digests(split) == digests(withSpellings), "seed \(seed): a split run stored other tables")
        for i in spellings.indices {
            let s = withSpellings.store, p = plain.store
            #expect(
                try s.teamView(Id(spellings[i]))?["memberCount"] == p.teamView(Id(ascii[i]))?["memberCount"],
                "seed \(seed): team \(ascii[i])")
            #expect(
                try s.unreadView(Id(spellings[i]))["total"] == p.unreadView(Id(ascii[i]))["total"],
                "seed \(seed): unread of \(ascii[i])")
        }
        #expect(try withSpellings.store.audit().ok)
        #expect(withSpellings.store.world.invariantViolations().isEmpty)
    }

    func digests(_ h: StoreHarness) throws -> [String] {
        try h.store.audit().tables.map { "\($0.table) \($0.digest)" }
    }
}
