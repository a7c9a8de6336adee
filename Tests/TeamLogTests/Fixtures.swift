import TeamLog
import TestSupport
import Testing

/// A pure in-memory processor for rule tests: decide + apply on a `World`, no store.
struct Machine {
    var world: World
    var now: Int64 = 1_000
    var outputs: [Output] = []

    init(config: Config = Config()) {
        world = World(config: config)
        world.indexJournal = IndexJournal()  // the unread index entries, for `unread` below
    }

    /// The unread count of `user` in a conversation, counted naively from the index entries `apply` made
    /// (the journal's seq lists): counted broadcasts − own + individually received, in
    /// (max(read, join), leave]. The store answers the same from its LMDB indexes by two seeks each.
    func unread(_ user: Id, _ key: ConvKey) -> Int {
        guard let uc = world.userConvs[user]?[key], let journal = world.indexJournal else { return 0 }
        let base = max(uc.readSeq, uc.joinSeq)
        let end = uc.leaveSeq ?? UInt64.max
        func count(_ seqs: [UInt64]?) -> Int { (seqs ?? []).filter { $0 > base && $0 <= end }.count }
        return count(journal.counted[key]) - count(journal.own[key]?[user]) + count(journal.directed[key]?[user])
    }

    /// Parses and submits a line; returns the rejection, if any.
    @discardableResult
    mutating func run(_ line: String) -> Rejection? {
        switch OpParser.parse(line: line) {
        case .failure(let r): return r
        case .success(let op):
            switch world.decide(op, now: now) {
            case .failure(let r):
                // As the store does: the removals due at the op's time are stored even though it fails.
                if let sync = world.dueMembersSync(at: op.ts ?? now) {
                    outputs.removeAll()
                    world.apply(sync, into: &outputs)
                    world.checkInvariants()
                }
                return r
            case .success(let event):
                outputs.removeAll()
                world.apply(event, into: &outputs)
                world.checkInvariants()
                return nil
            }
        }
    }

    /// Runs lines that must all be accepted.
    mutating func setup(_ lines: [String]) {
        for l in lines {
            if let r = run(l) { fatalError("setup line rejected: \(l) → \(r)") }
        }
    }

    var tips: [Tip] { outputs.compactMap { if case .tip(let t) = $0 { t } else { nil } } }
    var notices: [Notice] { outputs.compactMap { if case .notice(let n) = $0 { n } else { nil } } }
    var deliveries: [Delivery] { outputs.compactMap { if case .delivery(let d) = $0 { d } else { nil } } }
}

/// The standard team: `t1` owned by `own`, manager `mgr`, normal members `a` and `b`; apply join mode,
/// manager invite and update modes, no consent needed.
let baseTeam: [String] = [
    op("team.create", "own", ["team": "t1", "name": "Ops", "members": ["mgr", "a", "b"]]),
    op("team.addManagers", "own", ["team": "t1", "targets": ["mgr"]]),
]

/// Setup lines plus one op and the expected outcome (`nil`: accepted).
struct RuleCase: CustomTestStringConvertible, Sendable {
    let name: String
    let setup: [String]
    let op: String
    let expect: RejectionCode?
    var config: Config = Config()

    init(
        _ name: String, _ setup: [String] = baseTeam, _ op: String, _ expect: RejectionCode?, config: Config = Config()
    ) {
        self.name = name
        self.setup = setup
        self.op = op
        self.expect = expect
        self.config = config
    }

    var testDescription: String { name }

    /// Runs the case: an accepted op must have the effects SPEC gives it; a rejected one must leave a real
    /// store as it was (no pending event, no changed record: all-or-nothing).
    func check() throws {
        var m = Machine(config: config)
        m.setup(setup)
        let before = m.world
        let result = m.run(op)
        #expect(result?.code == expect, "\(name): \(result.map { "\($0)" } ?? "accepted")")
        if result == nil {
            expectEffects(of: op, before: before, after: m.world, outputs: m.outputs, name)
        } else {
            let residue = try RejectionResidue.probe(setup: setup, line: op, config: config, now: m.now)
            #expect(residue.rejection?.code == expect && residue.isClean, "\(name): \(residue)")
        }
    }
}
