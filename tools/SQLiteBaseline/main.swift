// teamlog-sqlite-baseline: the per-recipient-row design of open IM servers, in SQLite (GRDB, WAL, one
// transaction per batch), against teamlog on the same workload in the same process.
//
//   TEAMLOG_SQLITE_BASELINE=1 swift run -c release teamlog-sqlite-baseline [--ops N] [--max-team N] [--seconds S]
//
// Decisions (membership, permissions, who receives and who is alerted) come from the same domain for
// both; what differs is what is stored per message: teamlog appends one event and O(1) index records,
// the baseline writes one inbox row per recipient, bumps one unread counter row per counted recipient,
// writes one receipt row per recipient of a needReceipt message, and recounts unread with COUNT on read.

import GRDB
import TeamLog
import TeamLogStore
import TeamLogWorkload

#if canImport(Glibc)
import Glibc
#endif

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func tempDir(_ name: String) -> String {
    var template = Array("/tmp/teamlog-sqlite-\(name)-XXXXXX".utf8CString)
    return String(cString: template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }!)
}

func convKey(_ to: Conversation, _ actor: String) -> String {
    to.kind == .p2p ? "p:" + [actor, to.id].sorted().joined(separator: ",") : "t:" + to.id
}

func run() throws {
    var ops = 50_000
    var seconds = 60.0
    var options = MixedWorkload.Options()
    options.maxTeam = 2_000
    var args = CommandLine.arguments.dropFirst().makeIterator()
    while let a = args.next() {
        switch a {
        case "--ops": ops = Int(args.next()!)!
        case "--max-team": options.maxTeam = Int(args.next()!)!
        case "--seconds": seconds = Double(args.next()!)!
        default:
            print("usage: teamlog-sqlite-baseline [--ops N] [--max-team N] [--seconds S]")
            exit(2)
        }
    }
    var workload = MixedWorkload(options: options)
    var parsed: [Op] = []
    for _ in 0..<ops {
        if case .success(let op) = OpParser.parse(line: workload.next()) { parsed.append(op) }
    }
    let batch = 10_000

    // teamlog: pre-parsed ops, durable batches.
    var storeOptions = Store.Options()
    storeOptions.mapSize = 1 << 30
    let store = try Store(path: tempDir("teamlog"), options: storeOptions)
    store.wantsDeliveries = false
    var t = now()
    var teamlogMessages = 0
    for (i, op) in parsed.enumerated() {
        if case .accepted = try store.submit(op, now: 0), case .messageSend = op.body { teamlogMessages += 1 }
        if (i + 1) % batch == 0 { try store.commit() }
    }
    try store.commit()
    let teamlogSeconds = now() - t

    // The baseline: the same decisions, per-recipient rows.
    let dir = tempDir("rows")
    var config = Configuration()
    config.journalMode = .wal
    let db = try DatabasePool(path: dir + "/im.sqlite", configuration: config)
    try db.write { db in
        try db.execute(sql: """
            CREATE TABLE inbox(user TEXT, conv TEXT, seq INTEGER, message_id TEXT, counted INTEGER, alerted INTEGER,
                               read INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(user, conv, seq));
            CREATE TABLE unread(user TEXT, conv TEXT, count INTEGER NOT NULL, PRIMARY KEY(user, conv));
            CREATE TABLE receipts(message_id TEXT, user TEXT, read INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(message_id, user));
            CREATE TABLE messages(message_id TEXT PRIMARY KEY, seq INTEGER, conv TEXT, sender TEXT, content TEXT);
            """)
    }
    var world = World(config: store.world.config)
    world.wantsDeliveries = true
    var baselineMessages = 0
    var done = 0
    t = now()
    var out: [Output] = []
    while done < parsed.count && now() - t < seconds {
        let end = min(done + batch, parsed.count)
        try db.write { db in
            for op in parsed[done..<end] {
                guard case .success(let event) = world.decide(op, now: 0) else { continue }
                out.removeAll(keepingCapacity: true)
                world.apply(event, into: &out)
                switch op.body {
                case .messageSend(let m):
                    baselineMessages += 1
                    let conv = convKey(m.to, op.actor)
                    if m.isStored {
                        try db.execute(sql: "INSERT INTO messages VALUES (?,?,?,?,?)",
                                       arguments: [m.messageId, Int64(event.seq), conv, op.actor, m.content.jsonString])
                    }
                    for case .delivery(let d) in out {
                        let alerted = Set(d.alerted)
                        for user in d.receivers {
                            try db.execute(sql: "INSERT INTO inbox(user, conv, seq, message_id, counted, alerted) VALUES (?,?,?,?,?,?)",
                                           arguments: [user, conv, Int64(event.seq), m.messageId, m.counts ? 1 : 0, alerted.contains(user) ? 1 : 0])
                            if m.counts {
                                try db.execute(sql: "INSERT INTO unread VALUES (?,?,1) ON CONFLICT(user, conv) DO UPDATE SET count = count + 1",
                                               arguments: [user, conv])
                            }
                            if m.needReceipt && m.to.kind != .p2p {
                                try db.execute(sql: "INSERT INTO receipts(message_id, user) VALUES (?,?)", arguments: [m.messageId, user])
                            }
                        }
                    }
                case .messageRead(let to, let upTo):
                    let conv = convKey(to, op.actor)
                    try db.execute(sql: "UPDATE inbox SET read = 1 WHERE user = ? AND conv = ? AND seq <= ?",
                                   arguments: [op.actor, conv, Int64(upTo ?? event.seq)])
                    try db.execute(sql: """
                        INSERT INTO unread VALUES (?, ?, (SELECT COUNT(*) FROM inbox WHERE user = ? AND conv = ? AND read = 0 AND counted = 1))
                        ON CONFLICT(user, conv) DO UPDATE SET count = excluded.count
                        """, arguments: [op.actor, conv, op.actor, conv])
                case .messageReceipt(_, let ids):
                    for id in ids {
                        try db.execute(sql: "UPDATE receipts SET read = 1 WHERE message_id = ? AND user = ?", arguments: [id, op.actor])
                    }
                default:
                    break  // team and signaling state: the same in-memory domain for both designs
                }
            }
        }
        done = end
    }
    let baselineSeconds = now() - t
    let teamlogRate = Double(teamlogMessages) / teamlogSeconds
    let baselineRate = Double(baselineMessages) / baselineSeconds
    print("workload: \(ops) ops, teams up to \(options.maxTeam) members")
    print("teamlog            \(Int(teamlogRate)) messages/s (\(teamlogMessages) messages, all ops in \(Int(teamlogSeconds * 1000)) ms)")
    print("per-recipient rows \(Int(baselineRate)) messages/s (\(baselineMessages) messages of the first \(done) ops in \(Int(baselineSeconds * 1000)) ms)")
    print("ratio              teamlog is \(Int(teamlogRate / max(baselineRate, 1e-9)))x the per-recipient-row baseline")
}

do { try run() } catch {
    print("teamlog-sqlite-baseline: \(error)")
    exit(1)
}
