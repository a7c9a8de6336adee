@testable import TeamLog
import TeamLogWorkload
import Testing

/// `UserConvs` (one user's conversation views in `World`) answers as a `[ConvKey: UserConv]` of the same
/// operations — seeded random upserts, in-place changes and removals over a pool large enough to cross
/// from the array to the dictionary and back — with canonically equivalent but byte-different ids apart.
@Suite struct UserConvsTests {
    private static func pool() -> [ConvKey] {
        (0..<48).map { n in
            switch n % 4 {
            case 0: ConvKey(team: Id("caf\u{E9}-\(n % 16)"), kind: .team)
            case 1: ConvKey(team: Id("cafe\u{301}-\(n % 16)"), kind: .team)  // equal as Swift strings to case 0's
            case 2: ConvKey(team: Id("team-\(n)"), kind: n % 8 == 2 ? .superTeam : .team)
            default: ConvKey(p2p: Id("u\(n)"), Id("peer"))
            }
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func itAnswersAsADictionaryDoes(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let keys = Self.pool()
        var views = UserConvs()
        var model: [ConvKey: UserConv] = [:]
        var sawLarge = false
        var sawSmallAfterLarge = false
        for step in 0..<20_000 {
            let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
            // Phases that fill and then drain, so the views convert both ways.
            let filling = (step / 2_000) % 2 == 0
            let seq = UInt64(step + 1)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<4 where filling, 0..<1:
                let added = views.upsert(key, default: UserConv(joinSeq: seq)) { $0.readSeq = seq }
                #expect(added == (model[key] == nil))
                model[key, default: UserConv(joinSeq: seq)].readSeq = seq
            case 4..<6:
                let result = views.modify(key) { uc -> UInt64 in
                    uc.ownTotal += 1
                    return uc.ownTotal
                }
                if model[key] != nil { model[key]!.ownTotal += 1 }
                #expect(result == model[key]?.ownTotal)
            case 6:
                var uc = UserConv(joinSeq: seq)
                uc.leaveSeq = seq
                views[key] = uc
                model[key] = uc
            default:
                #expect(views.removeValue(forKey: key) == model.removeValue(forKey: key))
            }
            #expect(views.count == model.count)
            #expect(views.isEmpty == model.isEmpty)
            #expect(views[key] == model[key])
            #expect(views.contains(key) == (model[key] != nil))
            #expect(views[key, default: UserConv(joinSeq: 99)] == model[key, default: UserConv(joinSeq: 99)])
            if views.isLarge { sawLarge = true }
            if sawLarge && !views.isLarge && views.count > 0 { sawSmallAfterLarge = true }
            #expect(views.isLarge ? views.count > UserConvs.smallCount : views.count <= UserConvs.largeCount)
        }
        #expect(sawLarge && sawSmallAfterLarge, "the pool crosses both conversions")
        #expect(Dictionary(uniqueKeysWithValues: views.map { ($0.key, $0.value) }) == model)
        #expect(Set(views.keys) == Set(model.keys))
    }

    /// `insertNew` (a new team's views, added without a scan) leaves the views as `upsert` of the same
    /// absent keys does, across the conversion to a dictionary — byte-different ids kept apart.
    @Test func insertingNewViewsEqualsUpsertingThem() {
        let keys = Self.pool()
        var fast = UserConvs()
        var slow = UserConvs()
        var seen = Set<ConvKey>()
        for (n, key) in keys.enumerated() where seen.insert(key).inserted {
            let view = UserConv(joinSeq: UInt64(n + 1))
            fast.insertNew(key, view)
            let added = slow.upsert(key, default: view) { _ in }
            #expect(added)
            #expect(fast == slow)
            #expect(fast.isLarge == slow.isLarge)
            #expect(fast[key] == view)
        }
        #expect(fast.isLarge, "the pool crosses into a dictionary")
        #expect(fast.count == seen.count)
    }

    @Test func equalityIgnoresOrderButNotBytes() {
        let a = ConvKey(team: "caf\u{E9}", kind: .team)
        let b = ConvKey(team: "cafe\u{301}", kind: .team)
        let one = UserConv(joinSeq: 1)
        let two = UserConv(joinSeq: 2)
        let ab: UserConvs = [a: one, b: two]
        let ba: UserConvs = [b: two, a: one]
        #expect(ab == ba)
        #expect(ab != [a: two, b: one])
        #expect(ab != [a: one])
        var large = UserConvs()
        for n in 0...UserConvs.largeCount { large[ConvKey(team: Id("t\(n)"), kind: .team)] = one }
        #expect(large.isLarge)
        var reversed = UserConvs()
        for n in (0...UserConvs.largeCount).reversed() { reversed[ConvKey(team: Id("t\(n)"), kind: .team)] = one }
        #expect(large == reversed)
    }
}
