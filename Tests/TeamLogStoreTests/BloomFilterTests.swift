import TeamLog
import Testing

@testable import TeamLogStore

/// The working set's filter of evicted units (`BloomFilter`): never a false negative — a scratch store
/// that skipped the lookup of an evicted unit would replay from a state that lost it — and few false
/// positives (each costs a lookup that finds nothing).
@Suite struct BloomFilterTests {
    /// Every inserted key, of each kind, is reported; keys never inserted rarely are, at two loads.
    @Test(arguments: [(32, 0.001), (8, 0.04)])
    func noFalseNegativesAndFewFalsePositives(bitsPerKey: Int, bound: Double) {
        let bits = 1 << 20
        var filter = BloomFilter(bits: bits)
        let n = bits / bitsPerKey
        func key(_ i: Int) -> ResidentKey {
            switch i % 4 {
            case 0: .message(Id("m\(i)"))
            case 1: .team(Id("t\(i)"))
            case 2: .userConv(Id("u\(i)"), ConvKey(team: Id("t\(i % 97)"), kind: .team))
            default: .receipt(Id("m\(i)"))
            }
        }
        for i in 0..<n { filter.insert(key(i)) }
        var missed = 0
        for i in 0..<n where !filter.mayContain(key(i)) { missed += 1 }
        #expect(missed == 0, "an inserted key was not reported")
        let others = 200_000
        var falsePositives = 0
        for i in n..<(n + others) where filter.mayContain(key(i)) { falsePositives += 1 }
        let rate = Double(falsePositives) / Double(others)
        #expect(rate < bound, "false positives \(rate) at one key per \(bitsPerKey) bits")
        #expect(falsePositives > 0 || bitsPerKey > 16, "at one key per 8 bits some other key must collide")
    }
}
