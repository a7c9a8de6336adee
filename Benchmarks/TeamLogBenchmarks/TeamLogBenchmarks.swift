// package-benchmark micro-benchmarks of the hot pieces of the write path, each on its own:
// the event codec, `World.decide`, the fan-out core and JSON line parsing.
//
//   TEAMLOG_BENCHMARKS=1 swift package --scratch-path .build-bench benchmark
//
// Built only when TEAMLOG_BENCHMARKS is set (see the end of Package.swift). Inputs are built in each
// benchmark's `setup` closure, outside the measurement; fast operations run `scalingFactor` times per
// iteration and are reported per operation (the `*` rows of the output).

import Benchmark
import TeamLog
import TeamLogWorkload

let benchmarks: @Sendable () -> Void = {
    // perf counters (`instructions`) are not available on the shared Linux machines, so time, rate and
    // allocations only.
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        warmupIterations: 3,
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        maxIterations: 1_000
    )

    // MARK: Event codec (the log's value encoding)

    for name in ["message.send", "team.invite"] {
        Benchmark("EventCodec.encode \(name)") { benchmark, event in
            for _ in benchmark.scaledIterations {
                var w = ByteWriter(capacity: 96)  // as `Store.append` does: one buffer per event
                EventCodec.encode(event, into: &w)
                blackHole(w.bytes)
            }
        } setup: {
            sampleEvent(name: name)
        }

        Benchmark("EventCodec.decode \(name)") { benchmark, bytes in
            for i in benchmark.scaledIterations {
                blackHole(try! EventCodec.decode(seq: UInt64(i + 1), bytes))
            }
        } setup: {
            EventCodec.encode(sampleEvent(name: name))
        }
    }

    // MARK: World.decide (validation against state; pure, so the same op is decided again and again)

    Benchmark("World.decide message.send (team of 1,000)") { benchmark, input in
        for _ in benchmark.scaledIterations {
            blackHole(input.world.decide(input.op, now: 2))
        }
    } setup: {
        DecideInput(op: messageOp)
    }

    Benchmark("World.decide team.invite (team of 1,000)") { benchmark, input in
        for _ in benchmark.scaledIterations {
            blackHole(input.world.decide(input.op, now: 2))
        }
    } setup: {
        DecideInput(op: Op(actor: "u0", ts: 2, body: .teamInvite(team: teamId, targets: ["x1", "x2"])))
    }

    // MARK: The fan-out core: receivers and alerts of one message, word-wise over member bitsets

    for members in [200, 2_000, 10_000, 200_000] {
        Benchmark("FanOut.run (team of \(members.formatted))") { benchmark, input in
            var fan = input.fan
            var sink: UInt64 = 0
            for i in benchmark.scaledIterations {
                fan.run(input.bits, input.messages[i % input.messages.count])
                sink &+= fan.alerted[i % fan.alerted.count]
            }
            blackHole(sink)
        } setup: {
            FanOutInput(members: members)
        }
    }

    // MARK: JSON line parsing (lines of the benchmark workload, as `teamlog ingest` reads them)

    for name in ["message.send", "team.invite"] {
        Benchmark("OpParser.parse \(name) line") { benchmark, line in
            for _ in benchmark.scaledIterations {
                blackHole(line.withUnsafeBytes { OpParser.parse(line: $0) })
            }
        } setup: {
            sampleLine(name: name)
        }
    }
}

// MARK: - Inputs

/// The team every benchmark world holds.
let teamId = "big"

/// A message.send to the team of `DecideInput`, with one mention.
let messageOp: Op = {
    var send = MessageSend(
        to: Conversation(.team, teamId), messageId: "bench-m1",
        content: .object([("type", .string("text")), ("text", .string("hello"))]))
    send.mentions = ["u2"]
    return Op(actor: "u17", ts: 2, body: .messageSend(send))
}()

/// A world with a team of 1,000 members and an op it accepts.
struct DecideInput {
    var world: World
    var op: Op

    init(op: Op) {
        world = makeWorld(members: 1_000)
        // A rejection would measure the wrong path.
        guard case .success = world.decide(op, now: 2) else { fatalError("rejected \(op)") }
        self.op = op
    }
}

/// A team's member bits, messages from different senders, and a fan-out whose buffers already fit.
struct FanOutInput {
    var bits: MemberBits
    var messages: [FanOut.Message]
    var fan = FanOut()

    init(members: Int) {
        let team = makeWorld(members: members).teams[teamId]!
        bits = team.bits
        // Senders cycle over the members, as in `teamlog-fanout-bench`; slots are looked up here.
        messages = (0..<1_024).map { i in
            let sender = 1 + (i % (members - 1))
            return FanOut.Message(senderSlot: Int(team.slotOf["u\(sender)"]!), senderIsAdmin: sender % 100 == 0)
        }
        fan.run(bits, messages[0])  // grow the buffers to the team's size before measuring
    }
}

/// A world with one team of `members` (a superTeam above the team limit) built through the domain, with
/// the attributes of `teamlog-fanout-bench`: 1% managers, 10% notify none, 15% managerOnly, 30% online.
func makeWorld(members: Int) -> World {
    var world = World()
    world.wantsDeliveries = false
    func accept(_ op: Op) {
        guard case .success(let event) = world.decide(op, now: 1) else { fatalError("rejected \(op)") }
        var out: [Output] = []
        world.apply(event, into: &out)
    }
    var create = TeamCreate(team: teamId)
    create.kind = members > world.config.teamMaxMembers ? .superTeam : .team
    create.members = (1..<members).map { "u\($0)" }
    accept(Op(actor: "u0", body: .teamCreate(create)))
    let managers = (1..<members).filter { $0 % 100 == 0 }.map { "u\($0)" }
    if !managers.isEmpty { accept(Op(actor: "u0", body: .teamAddManagers(team: teamId, targets: managers))) }
    var rng = SplitMix64(seed: 1)
    for i in 1..<members {
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 10 {
            accept(Op(actor: "u\(i)", body: .memberSetNotify(team: teamId, state: .none)))
        } else if roll < 25 {
            accept(Op(actor: "u\(i)", body: .memberSetNotify(team: teamId, state: .managerOnly)))
        }
        if Int.random(in: 0..<100, using: &rng) < 30 { accept(Op(actor: "u\(i)", device: "d", body: .clientLogin)) }
    }
    world.clearChanges()
    return world
}

/// The first line named `name` of the seeded mixed workload with supergroups up to 2,000 members: the
/// same line `teamlog-gen --max-team 2000` writes.
func sampleLine(name: String) -> [UInt8] {
    var options = MixedWorkload.Options()
    options.maxTeam = 2_000
    var workload = MixedWorkload(options: options)
    for _ in 0..<100_000 {
        let line = Array(workload.next().utf8)
        guard case .success(let op) = OpParser.parse(line: line), op.name == name else { continue }
        return line
    }
    fatalError("no \(name) line in the workload")
}

/// The event of `sampleLine(name:)`, as the log stores it.
func sampleEvent(name: String) -> Event {
    guard case .success(let op) = OpParser.parse(line: sampleLine(name: name)) else { fatalError("bad line") }
    return Event(seq: 1, ts: op.ts ?? 1, op: op)
}

extension Int {
    /// With thousands separators, for benchmark names.
    fileprivate var formatted: String {
        let digits = Array(String(self))
        var out = ""
        for (i, d) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(d)
        }
        return out
    }
}
