// Measures the fan-out core alone: one message to a team of N members, receivers + alerts decided per
// member (word-wise over member bitsets), against a naive per-member dictionary loop doing the same job,
// and the whole domain `apply` of a message.send (fan-out + unread counting + message record).
// Ratios are taken in the same process, one after the other, so machine noise affects both alike.
//
//   swift run -c release teamlog-fanout-bench [members] [messages]

import TeamLog
import TeamLogWorkload

#if canImport(Glibc)
    import Glibc
#endif

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func benchmark() {
    let args = CommandLine.arguments
    let members = args.count > 1 ? Int(args[1])! : 10_000
    let messages = args.count > 2 ? Int(args[2])! : 200_000

    // A team with realistic attributes: 1% managers, 10% notify none, 15% managerOnly, 30% online.
    var rng = SplitMix64(seed: 1)
    var world = World()
    world.wantsDeliveries = false
    var config = Config()
    config.teamMaxMembers = max(config.teamMaxMembers, members)
    world = World(config: config)
    world.wantsDeliveries = false
    func accept(_ op: Op) {
        guard case .success(let e) = world.decide(op, now: 1) else { fatalError("rejected \(op)") }
        var out: [Output] = []
        world.apply(e, into: &out)
    }
    var create = TeamCreate(team: "big")
    create.members = (1..<members).map { "u\($0)" }
    accept(Op(actor: "u0", body: .teamCreate(create)))
    accept(
        Op(
            actor: "u0",
            body: .teamAddManagers(team: "big", targets: (1..<members).filter { $0 % 100 == 0 }.map { "u\($0)" })))
    for i in 1..<members {
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 10 {
            accept(Op(actor: "u\(i)", body: .memberSetNotify(team: "big", state: .none)))
        } else if roll < 25 {
            accept(Op(actor: "u\(i)", body: .memberSetNotify(team: "big", state: .managerOnly)))
        }
        if Int.random(in: 0..<100, using: &rng) < 30 { accept(Op(actor: "u\(i)", device: "d", body: .clientLogin)) }
    }
    let team = world.teams["big"]!
    let bits = team.bits

    // 1. The bitset core.
    var fan = FanOut()
    var sink = 0
    var t0 = now()
    for i in 0..<messages {
        let sender = 1 + (i % (members - 1))
        fan.run(bits, FanOut.Message(senderSlot: Int(team.slotOf["u\(sender)"]!), senderIsAdmin: sender % 100 == 0))
        sink &+= Int(fan.alerted[i % fan.alerted.count] & 1)
    }
    let coreSeconds = now() - t0

    // 2. The naive loop: a dictionary lookup per member for role and notify state.
    struct NaiveMember { var role: Role; var notify: NotifyState; var online: Bool }
    var naive: [Id: NaiveMember] = [:]
    for m in team.slots.compactMap({ $0 }) {
        naive[m.user] = NaiveMember(role: m.role, notify: m.notify, online: MemberBits.test(bits.online, Int(m.slot)))
    }
    let roster = team.roster.map(\.user)
    let naiveMessages = max(1, messages / 50)
    t0 = now()
    for i in 0..<naiveMessages {
        let sender: Id = "u\(1 + (i % (members - 1)))"
        let senderIsAdmin = naive[sender]!.role.isAdmin
        var receivers = 0
        var alerted = 0
        for user in roster where user != sender {
            let m = naive[user]!
            receivers += 1
            if m.notify == .none { continue }
            if m.notify == .managerOnly && !senderIsAdmin { continue }
            alerted += 1
        }
        sink &+= receivers &+ alerted
    }
    let naiveSeconds = now() - t0

    // 3. The whole domain apply of message.send (fan-out, unread counting, message record; no output).
    let applyMessages = max(1, messages / 10)
    var sends: [Event] = []
    for i in 0..<applyMessages {
        var m = MessageSend(
            to: Conversation(.team, "big"), messageId: "m\(i)", content: .object([("type", .string("text"))]))
        m.mentions = []
        let op = Op(actor: "u\(1 + (i % (members - 1)))", ts: 2, body: .messageSend(m))
        sends.append(Event(seq: 0, ts: 2, op: op))
    }
    var out: [Output] = []
    t0 = now()
    for var e in sends {
        e.seq = world.lastSeq + 1
        world.apply(e, into: &out)
        out.removeAll(keepingCapacity: true)
        world.clearChanges()
    }
    let applySeconds = now() - t0

    let decisionsCore = Double(members) * Double(messages) / coreSeconds
    let decisionsNaive = Double(members) * Double(naiveMessages) / naiveSeconds
    print(
        "team of \(members) members (\(MemberBits.count(bits.admins)) admins, \(MemberBits.count(bits.notifyNone)) none, \(MemberBits.count(bits.notifyManagerOnly)) managerOnly, \(MemberBits.count(bits.online)) online)"
    )
    print(
        "bitset core     \(messages) messages  \(String(format1(coreSeconds / Double(messages) * 1e9))) ns/message  \(String(format1(decisionsCore / 1e9))) G member-decisions/s"
    )
    print(
        "naive loop      \(naiveMessages) messages  \(String(format1(naiveSeconds / Double(naiveMessages) * 1e9))) ns/message  \(String(format1(decisionsNaive / 1e9))) G member-decisions/s"
    )
    print("ratio           core is \(String(format1(decisionsCore / decisionsNaive)))x the naive loop")
    print(
        "domain apply    \(applyMessages) message.send  \(String(format1(applySeconds / Double(applyMessages) * 1e9))) ns/message (fan-out + unread + record)"
    )
    if sink == 42 { print("") }
}

benchmark()

func format1(_ x: Double) -> String {
    let scaled = Int((x * 10).rounded())
    return "\(scaled / 10).\(abs(scaled % 10))"
}
