import Testing

@testable import TeamLog

/// `Id`'s own table hash (`_rawHashValue(seed:)`, `bytesHash`): a function of the bytes and the seed only.
@Suite struct IdHashTests {
    @Test func equalBytesHashEquallyAndDistinctBytesApart() {
        let nfc = Id("caf\u{E9}")
        let nfd = Id("cafe\u{301}")
        #expect(nfc._rawHashValue(seed: 7) == Id(String(decoding: Array(nfc.utf8), as: UTF8.self))._rawHashValue(seed: 7))
        #expect(nfc._rawHashValue(seed: 7) != nfd._rawHashValue(seed: 7))
        // Every length through two words and a tail, and ids that differ in one byte at any place, or
        // only in length (a trailing NUL: the tail word alone would not tell them apart).
        var seen = Set<Int>()
        var count = 0
        for length in 0...40 {
            let base = [UInt8](repeating: 0x61, count: length)
            for place in 0..<max(length, 1) {
                var bytes = base
                if length > 0 { bytes[place] = 0x62 }
                seen.insert(Id(String(decoding: bytes, as: UTF8.self))._rawHashValue(seed: 1))
                count += 1
            }
            seen.insert(Id(String(decoding: base + [0], as: UTF8.self))._rawHashValue(seed: 1))
            count += 1
        }
        #expect(seen.count == count)
    }

    @Test func theSeedChangesEveryHash() {
        let ids = (0..<1_000).map { Id("user-\($0)") }
        let differing = ids.filter { $0._rawHashValue(seed: 1) != $0._rawHashValue(seed: 2) }
        #expect(differing.count == ids.count)
    }

    /// The low bits pick the bucket: sequential ids must spread over them (a table of 4,096 buckets here).
    @Test func sequentialIdsSpreadOverBuckets() {
        var buckets = [Int](repeating: 0, count: 4_096)
        for n in 0..<40_960 { buckets[Id("u\(n)")._rawHashValue(seed: 12_345) & 4_095] += 1 }
        // 10 per bucket on average; a bucket of 40 would be > 9 standard deviations out for a uniform hash.
        #expect(buckets.max()! < 40)
        #expect(buckets.filter { $0 == 0 }.count < 40)  // ~e⁻¹⁰ of 4,096 buckets empty: ~0.2 expected
    }

    @Test func setsAndDictionariesOfIdsAgreeWithByteEquality() {
        var table: [Id: Int] = [:]
        for n in 0..<5_000 { table[Id("k\(n % 2_500)")] = n }
        #expect(table.count == 2_500)
        #expect(table[Id("k17")] == 2_517)
        #expect(Set([Id("caf\u{E9}"), Id("cafe\u{301}"), Id("caf\u{E9}")]).count == 2)
    }
}

/// `Ids.problem` (one pass over the bytes) against SPEC §1's rule written over Unicode scalars: no C0 or C1
/// control, no DEL, 1–128 bytes. And `sameUTF8`, the JSON layer's key equality, against byte equality.
@Suite struct IdRuleTests {
    static func reference(_ id: String) -> String? {
        if id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80...0x9F).contains($0.value) }) {
            return "contains a control character"
        }
        let count = id.utf8.count
        if count == 0 { return "is empty" }
        if count > Ids.maxBytes { return "is \(count) bytes, longer than \(Ids.maxBytes)" }
        return nil
    }

    static let pool: [Unicode.Scalar] = [
        "a", "Z", "0", "-", " ", "\u{0}", "\u{1F}", "\u{7F}", "\u{80}", "\u{85}", "\u{9F}", "\u{A0}", "\u{A9}",
        "\u{BF}", "\u{C0}", "\u{E9}", "\u{301}", "\u{7FF}", "\u{800}", "\u{2028}", "\u{FEFF}", "\u{1F600}",
    ]

    @Test func theByteRuleIsTheScalarRule() {
        var rng = JSONTests.SplitMix64(state: 11)
        for _ in 0..<20_000 {
            var s = String.UnicodeScalarView()
            for _ in 0..<Int(rng.next() % 40) { s.append(Self.pool[Int(rng.next() % UInt64(Self.pool.count))]) }
            let id = String(s)
            #expect(Ids.problem(id) == Self.reference(id), "\(Array(id.utf8))")
            let other = String(String.UnicodeScalarView(s.reversed()))
            #expect(JSONValue.sameUTF8(id, other) == (Array(id.utf8) == Array(other.utf8)))
        }
        #expect(Ids.problem(String(repeating: "é", count: 64)) == nil)  // 128 bytes
        #expect(Ids.problem(String(repeating: "é", count: 64) + "a") == "is 129 bytes, longer than 128")
        #expect(!JSONValue.sameUTF8("caf\u{E9}", "cafe\u{301}"))
    }

    /// `ConvKey` and `ProjectionKey` hash by their bytes too: equal keys (an ordinal aside, which `==`
    /// compares but a key read back from disk lacks) hash alike under a seed, and keys that differ in the
    /// case, the kind, the order of their ids or one seq hash apart.
    @Test func keysHashByTheirParts() {
        let team = ConvKey(team: "t1", kind: .team)
        let superTeam = ConvKey(team: "t1", kind: .superTeam)
        #expect(team._rawHashValue(seed: 3) == ConvKey(team: Id("t" + "1"), kind: .team)._rawHashValue(seed: 3))
        #expect(team._rawHashValue(seed: 3) != superTeam._rawHashValue(seed: 3))
        #expect(ConvKey(p2p: "a", "b")._rawHashValue(seed: 3) == ConvKey(p2p: "b", "a")._rawHashValue(seed: 3))
        let keys: [ProjectionKey] = [
            .team("t1"), .message("t1"), .receipt("t1"), .presence("t1"), .channel("t1"), .offline("t1"),
            .member("t1", "u1"), .member("u1", "t1"), .pastMembers("t1", "u1"), .invite("t1", "u1"),
            .application("t1", "u1"), .receiptRead("t1", "u1", ordinal: 0), .conv(team), .conv(superTeam),
            .counted(team, 5, ordinal: 0), .counted(team, 6, ordinal: 0), .own(team, "u1", 5, ordinal: 0),
            .directed(team, "u1", 5, ordinal: 0), .userConv("u1", team), .userConv("u1", superTeam),
        ]
        #expect(Set(keys.map { $0._rawHashValue(seed: 9) }).count == keys.count)
        #expect(
            ProjectionKey.counted(team, 5, ordinal: 3)._rawHashValue(seed: 9)
                == ProjectionKey.counted(team, 5, ordinal: 0)._rawHashValue(seed: 9))
        #expect(ProjectionKey.userConv("u1", team)._rawHashValue(seed: 9) != keys[18]._rawHashValue(seed: 10))
        // A set of them finds each by an equal copy.
        let set = Set(keys)
        #expect(keys.allSatisfy { set.contains($0) })
        #expect(set.contains(.userConv(Id("u" + "1"), ConvKey(team: "t1", kind: .team))))
    }
}
