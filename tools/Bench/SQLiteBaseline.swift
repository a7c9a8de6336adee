// The per-recipient-row baseline: the common design of open IM servers, in SQLite (Debian's libsqlite3,
// WAL, synchronous=FULL so every batch is durable, one transaction per batch, statements prepared once).
//
// Decisions (membership, permissions, who receives and who is alerted) come from the same domain as
// teamlog's, so both do the same job; what differs is what is stored per message. teamlog appends one
// event and O(1) index records; the baseline writes one inbox row per recipient, bumps one unread counter
// row per counted recipient, writes one receipt row per recipient of a needReceipt team message, and
// recounts unread with COUNT on read.

import CSQLite
import TeamLog

#if canImport(Glibc)
    import Glibc
#endif

/// SQLITE_TRANSIENT: SQLite copies bound text before the call returns.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

struct SQLiteError: Error, CustomStringConvertible {
    var description: String
}

/// One SQLite connection with prepared statements; the smallest wrapper the baseline needs.
final class SQLiteDB {
    private var db: OpaquePointer?

    init(path: String) throws {
        guard sqlite3_open(path, &db) == SQLITE_OK else { throw SQLiteError(description: "open \(path)") }
    }

    deinit {
        sqlite3_close(db)
    }

    func exec(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(db, sql, nil, nil, &message) != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "unknown"
            sqlite3_free(message)
            throw SQLiteError(description: "\(text) in: \(sql)")
        }
    }

    func prepare(_ sql: String) throws -> Statement {
        var stmt: OpaquePointer?
        guard sqlite3_prepare_v2(db, sql, -1, &stmt, nil) == SQLITE_OK, let stmt else {
            throw SQLiteError(description: String(cString: sqlite3_errmsg(db)) + " in: " + sql)
        }
        return Statement(stmt: stmt, db: self)
    }

    var lastError: String { String(cString: sqlite3_errmsg(db)) }

    /// A prepared statement, reset and rebound for every execution.
    final class Statement {
        private let stmt: OpaquePointer
        private let db: SQLiteDB

        fileprivate init(stmt: OpaquePointer, db: SQLiteDB) {
            self.stmt = stmt
            self.db = db
        }

        deinit {
            sqlite3_finalize(stmt)
        }

        enum Value {
            case text(String)
            case int(Int64)

            static func text(_ id: Id) -> Value { .text(id.string) }
        }

        func run(_ values: Value...) throws {
            sqlite3_reset(stmt)
            for (i, v) in values.enumerated() {
                switch v {
                case .text(let s): sqlite3_bind_text(stmt, Int32(i + 1), s, -1, transient)
                case .int(let n): sqlite3_bind_int64(stmt, Int32(i + 1), n)
                }
            }
            let rc = sqlite3_step(stmt)
            guard rc == SQLITE_DONE || rc == SQLITE_ROW else { throw SQLiteError(description: db.lastError) }
        }
    }
}

struct BaselineResult {
    var messages = 0
    var opsDone = 0
    var seconds = 0.0
    /// Inbox rows written: one per recipient of a message (the design's deliveries).
    var inboxRows = 0
    /// Receiver and alert decisions taken by the shared domain for those messages.
    var memberDecisions = 0
    /// Database file plus WAL at the end.
    var bytes = 0
}

/// Runs the per-recipient-row design over `ops` in batches until they run out or `budget` seconds pass.
func runPerRecipientRows(
    _ ops: [Op], config: Config, batch: Int, budget: Double, dir: String
) throws -> BaselineResult {
    let db = try SQLiteDB(path: dir + "/im.sqlite")
    try db.exec(
        """
        PRAGMA journal_mode = WAL;
        PRAGMA synchronous = FULL;
        CREATE TABLE inbox(user TEXT, conv TEXT, seq INTEGER, message_id TEXT, counted INTEGER, alerted INTEGER,
                           read INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(user, conv, seq));
        CREATE TABLE unread(user TEXT, conv TEXT, count INTEGER NOT NULL, PRIMARY KEY(user, conv));
        CREATE TABLE receipts(message_id TEXT, user TEXT, read INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(message_id, user));
        CREATE TABLE messages(message_id TEXT PRIMARY KEY, seq INTEGER, conv TEXT, sender TEXT, content TEXT);
        """)
    let insertMessage = try db.prepare("INSERT INTO messages VALUES (?,?,?,?,?)")
    let insertInbox = try db.prepare(
        "INSERT INTO inbox(user, conv, seq, message_id, counted, alerted) VALUES (?,?,?,?,?,?)")
    let bumpUnread = try db.prepare(
        "INSERT INTO unread VALUES (?,?,1) ON CONFLICT(user, conv) DO UPDATE SET count = count + 1")
    let insertReceipt = try db.prepare("INSERT INTO receipts(message_id, user) VALUES (?,?)")
    let markRead = try db.prepare("UPDATE inbox SET read = 1 WHERE user = ? AND conv = ? AND seq <= ?")
    let recount = try db.prepare(
        """
        INSERT INTO unread VALUES (?, ?, (SELECT COUNT(*) FROM inbox WHERE user = ? AND conv = ? AND read = 0 AND counted = 1))
        ON CONFLICT(user, conv) DO UPDATE SET count = excluded.count
        """)
    let markReceipt = try db.prepare("UPDATE receipts SET read = 1 WHERE message_id = ? AND user = ?")

    var world = World(config: config)
    world.wantsDeliveries = true
    var stats = FanOutStats()
    var result = BaselineResult()
    var out: [Output] = []
    let start = now()
    while result.opsDone < ops.count && now() - start < budget {
        let end = min(result.opsDone + batch, ops.count)
        try db.exec("BEGIN")
        for op in ops[result.opsDone..<end] {
            guard case .success(let event) = world.decide(op, now: 0) else { continue }
            out.removeAll(keepingCapacity: true)
            world.apply(event, into: &out, counting: &stats)
            switch op.body {
            case .messageSend(let m):
                result.messages += 1
                let conv = conversationKey(m.to, op.actor)
                let seq = Int64(event.seq)
                if m.isStored {
                    try insertMessage.run(
                        .text(m.messageId), .int(seq), .text(conv), .text(op.actor), .text(m.content.jsonString))
                }
                for case .delivery(let d) in out {
                    let alerted = Set(d.alerted)
                    result.inboxRows += d.receivers.count
                    for user in d.receivers {
                        try insertInbox.run(
                            .text(user), .text(conv), .int(seq), .text(m.messageId), .int(m.counts ? 1 : 0),
                            .int(alerted.contains(user) ? 1 : 0))
                        if m.counts { try bumpUnread.run(.text(user), .text(conv)) }
                        if m.needReceipt && m.to.kind != .p2p { try insertReceipt.run(.text(m.messageId), .text(user)) }
                    }
                }
            case .messageRead(let to, let upTo):
                let conv = conversationKey(to, op.actor)
                try markRead.run(.text(op.actor), .text(conv), .int(Int64(upTo ?? event.seq)))
                try recount.run(.text(op.actor), .text(conv), .text(op.actor), .text(conv))
            case .messageReceipt(_, let ids):
                for id in ids { try markReceipt.run(.text(id), .text(op.actor)) }
            default:
                break  // team and signaling state: the same in-memory domain for both designs
            }
        }
        try db.exec("COMMIT")
        result.opsDone = end
    }
    result.seconds = now() - start
    result.memberDecisions = stats.memberDecisions
    for file in ["/im.sqlite", "/im.sqlite-wal"] {
        var st = stat()
        if stat(dir + file, &st) == 0 { result.bytes += Int(st.st_size) }
    }
    return result
}

/// The conversation's text key: the domain's own key bytes.
private func conversationKey(_ to: Conversation, _ actor: Id) -> String {
    String(decoding: ConvKey(to, actor: actor).bytes, as: UTF8.self)
}
