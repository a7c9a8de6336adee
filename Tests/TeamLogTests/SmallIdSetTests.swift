import TeamLog
import TeamLogWorkload
import Testing

/// `SmallIdSet` (the user → teams index of `World`) answers as a `Set<Id>` of the same operations: seeded
/// random inserts and removals, with canonically equivalent but byte-different ids kept apart.
@Suite struct SmallIdSetTests {
    @Test(arguments: [1, 2, 3] as [UInt64])
    func itAnswersAsASetDoes(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let pool: [Id] = (0..<40).map { n in
            switch n % 4 {
            case 0: Id("caf\u{E9}-\(n % 8)")
            case 1: Id("cafe\u{301}-\(n % 8)")  // equal as Swift strings to case 0's, not as ids
            case 2: Id("team-\(n)")
            default: Id(String(repeating: "t", count: n % 20))
            }
        }
        var small = SmallIdSet()
        var model = Set<Id>()
        for _ in 0..<5_000 {
            let id = pool[Int.random(in: 0..<pool.count, using: &rng)]
            if Bool.random(using: &rng) {
                #expect(small.insert(id) == model.insert(id).inserted)
            } else {
                #expect(small.remove(id) == (model.remove(id) != nil))
            }
            #expect(small.count == model.count)
            #expect(small.isEmpty == model.isEmpty)
            #expect(small.contains(id) == model.contains(id))
        }
        #expect(Set(small) == model)
        #expect(Array(small).count == model.count)  // no element twice
    }

    /// `insertNew` (a new team in its members' lists, added without a scan) gives the set `insert` of
    /// the same absent ids gives, byte-different ids kept apart.
    @Test func insertingNewIdsEqualsInsertingThem() {
        var fast = SmallIdSet()
        var slow = SmallIdSet()
        for id in [Id("caf\u{E9}"), Id("cafe\u{301}"), Id("x"), Id("")] {
            fast.insertNew(id)
            let inserted = slow.insert(id)
            #expect(inserted)
            #expect(fast == slow)
            #expect(fast.contains(id))
        }
        #expect(fast.count == 4)
    }

    @Test func equalityIgnoresOrderButNotBytes() {
        let a = Id("caf\u{E9}")
        let b = Id("cafe\u{301}")
        let c = Id("x")
        var ab: SmallIdSet = [a, b]
        let ba: SmallIdSet = [b, a]
        #expect(ab == ba)
        #expect(ab != [a, c])
        #expect(ab != [a])
        #expect([a, a] as SmallIdSet == [a])
        ab.remove(a)
        #expect(ab == [b])
        #expect(ab != [a])
    }
}
