@testable import TeamLog
import TeamLogWorkload
import Testing

/// `ShardedDictionary` (the messages, receipt tallies and users' conversations of `World`) behaves as a
/// `Dictionary` of the same operations: seeded random inserts, updates in place, removals and clears,
/// checked against one.
@Suite struct ShardedDictionaryTests {
    @Test(arguments: [1, 2, 3] as [UInt64])
    func itAnswersAsADictionaryDoes(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var sharded = ShardedDictionary<Id, Int>()
        var plain: [Id: Int] = [:]
        // Ids of 1–24 bytes, some non-ASCII and some canonically equivalent but byte-different ("é" as one
        // scalar and as e + U+0301): distinct keys, as every table's ids are.
        let pool: [Id] = (0..<3_000).map { n in
            switch n % 5 {
            case 0: Id("m\(n)")
            case 1: Id("caf\u{E9}-\(n)")
            case 2: Id("cafe\u{301}-\(n)")
            case 3: Id(String(repeating: "x", count: n % 24))
            default: Id("user-\(n * 7919)")
            }
        }
        for step in 0..<20_000 {
            let key = pool[Int.random(in: 0..<pool.count, using: &rng)]
            switch Int.random(in: 0..<12, using: &rng) {
            case 0..<5:
                sharded[key] = step
                plain[key] = step
            case 5, 6:
                let a = sharded.withValue(forKey: key) { value -> Int in
                    value += 1
                    return value
                }
                let b = plain[key].map { $0 + 1 }
                if b != nil { plain[key] = b }
                #expect(a == b)
            case 7:
                #expect(sharded.removeValue(forKey: key) == plain.removeValue(forKey: key))
            case 8:
                // Through the in-place accessor: an insert when absent, a removal every third time.
                func bump(_ value: inout Int?) { value = value == nil ? step : (value! % 3 == 0 ? nil : value! + 1) }
                bump(&sharded[key])
                bump(&plain[key])
            case 9 where rng.chance(0.3):
                sharded[key] = nil
                plain[key] = nil
            case 10:
                // The defaulting accessor, in place: an insert of the default when absent.
                sharded[key, default: 100] += 1
                plain[key, default: 100] += 1
                #expect(sharded[key, default: -1] == plain[key, default: -1])
            default:
                if rng.chance(0.002) {
                    sharded.removeAll()
                    plain.removeAll()
                }
                sharded[key]? += 10
                plain[key]? += 10
            }
            #expect(sharded[key] == plain[key])
            #expect(sharded.count == plain.count, "the kept count")
            #expect(sharded.containsKey(key) == (plain[key] != nil))
        }
        #expect(sharded.count == plain.count)
        #expect(sharded.isEmpty == plain.isEmpty)
        #expect(Dictionary(uniqueKeysWithValues: sharded.map { ($0.key, $0.value) }) == plain)
        #expect(Set(sharded.keys) == Set(plain.keys))
        #expect(sharded.values.sorted() == plain.values.sorted())
        var rebuilt = ShardedDictionary<Id, Int>()
        for (key, value) in plain { rebuilt[key] = value }
        #expect(rebuilt == sharded)
        if let (key, value) = plain.first {
            rebuilt[key] = value + 1
            #expect(rebuilt != sharded)
        }
    }

    /// The shard hash of an id is a function of its bytes: equal ids, equal shards; a canonically
    /// equivalent id with other bytes is another key.
    @Test func equalIdsShareAShardAndEquivalentOnesAreDistinct() {
        #expect(Id("m1").shardHash == Id(String("m" + "1")).shardHash)
        var table = ShardedDictionary<Id, Int>()
        table[Id("caf\u{E9}")] = 1
        table[Id("cafe\u{301}")] = 2
        #expect(table.count == 2)
        #expect(table[Id("caf\u{E9}")] == 1 && table[Id("cafe\u{301}")] == 2)
    }

    /// The shards' shares grow geometrically, 2^(s/256), so their sizes spread over a factor of two and
    /// they cross their growth thresholds one after another, not all within the same thousand insertions.
    @Test func shardSizesSpreadOverAFactorOfTwo() {
        // The prefix table: every shard has prefixes, in order, 11 to 22 of them.
        #expect(shardOfPrefix.count == 1 << shardPrefixBits)
        #expect(zip(shardOfPrefix, shardOfPrefix.dropFirst()).allSatisfy { $0 <= $1 })
        var perShard = [Int](repeating: 0, count: 256)
        for s in shardOfPrefix { perShard[Int(s)] += 1 }
        #expect(perShard.min()! >= 10 && perShard.max()! <= 23, "\(perShard.min()!)…\(perShard.max()!)")
        // Real ids: the first and last 32 shards' sizes are about 1 : 2.
        var table = ShardedDictionary<Id, Int>()
        for n in 0..<200_000 { table[Id("m\(n)")] = n }
        let sizes = table.shards.map(\.count)
        let low = sizes.prefix(32).reduce(0, +)
        let high = sizes.suffix(32).reduce(0, +)
        #expect(Double(high) / Double(low) > 1.7 && Double(high) / Double(low) < 2.3, "\(low) vs \(high)")
        // Growth spread out: while the table grows 0 → 120,000 entries (each shard's storage doubling from
        // 192 to 384 and 768 entries on the way), no 2,000 consecutive insertions grow more than a few
        // dozen shards. With equal shares the
        // 256 shards' thresholds fell within a few thousand insertions of each other.
        var growing = ShardedDictionary<Id, Int>()
        var capacities = growing.shards.map(\.capacity)
        var grownInWindow = 0
        var worstWindow = 0
        for n in 0..<120_000 {
            let key = Id("g\(n)")
            growing[key] = n
            let s = ShardedDictionary<Id, Int>.shard(of: key)
            if growing.shards[s].capacity != capacities[s] {
                capacities[s] = growing.shards[s].capacity
                if capacities[s] >= 256 { grownInWindow += 1 }  // the small growths of the start cost little
            }
            if n % 2_000 == 1_999 {
                worstWindow = max(worstWindow, grownInWindow)
                grownInWindow = 0
            }
        }
        #expect(worstWindow <= 40, "\(worstWindow) shards grew within 2,000 insertions")
    }
}
