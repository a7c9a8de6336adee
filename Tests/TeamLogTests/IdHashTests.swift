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
