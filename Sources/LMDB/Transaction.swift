internal import CLMDB

#if canImport(Glibc)
    import Glibc
#endif

/// A read transaction: a consistent snapshot of the environment.
///
/// Valid only inside the closure that received it; every byte buffer it lends is valid only until the
/// transaction ends, so callers copy what they keep.
public class Transaction {
    // The mutable fields are exempt from Swift's run-time exclusivity checks (a `swift_beginAccess` and
    // `swift_endAccess` pair, ~100 instructions, on every access to a class's stored property): a
    // transaction and its cursors are used by one thread at a time, as LMDB requires, and no access to
    // them overlaps another. The checks were 6% of an audit's instructions (callgrind of a 98,135-event
    // audit: two per cursor step of the table comparison and of every scratch checkpoint's puts).
    @exclusivity(unchecked) var txn: OpaquePointer
    let environment: Environment
    @exclusivity(unchecked) private(set) var finished = false

    /// `adoptResize` false: fail with `.mapResized` instead of adopting a map another process grew
    /// (adopting remaps the file, which is only safe while no other transaction of this process is open).
    init(env: Environment, parent: OpaquePointer?, flags: UInt32, adoptResize: Bool = true) throws {
        environment = env
        var handle: OpaquePointer?
        var rc = mdb_txn_begin(env.env, parent, flags, &handle)
        if rc == MDB_MAP_RESIZED && adoptResize {
            try env.adoptResize()
            rc = mdb_txn_begin(env.env, parent, flags, &handle)
        }
        try check(rc, "mdb_txn_begin")
        txn = handle!
    }

    /// Cursor positionings (`mdb_cursor_get` calls) made in this transaction so far: what a query costs,
    /// in B-tree descents and steps, independent of timing (tests check that a count is two seeks).
    @exclusivity(unchecked) public internal(set) var cursorMoves = 0

    /// The snapshot's transaction id: two read transactions with the same id see the same data.
    public var snapshotID: Int { Int(mdb_txn_id(txn)) }

    func abort() {
        guard !finished else { return }
        finished = true
        mdb_txn_abort(txn)
    }

    func commit() throws {
        precondition(!finished, "transaction already finished")
        finished = true
        try check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    /// The transaction id (increases with every committed write).
    public var id: Int { Int(mdb_txn_id(txn)) }

    // MARK: Reading

    /// Calls `body` with the value stored under `key`, or `nil` when there is none, without copying.
    public func withValue<R>(
        _ db: DatabaseHandle, key: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer?) throws -> R
    ) throws -> R {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_get(txn, MDB_dbi(db.dbi), &k, &v)
        if rc == MDB_NOTFOUND { return try body(nil) }
        try check(rc, "mdb_get \(db.name)")
        return try body(UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size))
    }

    /// The raw bytes stored under `key`, copied, or `nil`.
    public func get(_ db: DatabaseHandle, key: [UInt8]) throws -> [UInt8]? {
        try key.withUnsafeBytes { kb in try withValue(db, key: kb) { $0.map { Array($0) } } }
    }

    /// The decoded value stored under `key`, or `nil`. Inlinable, so a caller's codecs are specialized:
    /// a generic call instantiated their metadata at every lookup (the writer's opId check, once per op).
    @inlinable
    public func get<K, V>(_ db: Database<K, V>, _ key: K.Item) throws -> V.Item? {
        try K.encoded(key).withUnsafeBytes { kb in
            try withValue(db.handle, key: kb) { bytes -> V.Item? in
                guard let bytes else { return nil }
                return try V.decode(bytes)
            }
        }
    }

    /// Number of entries, depth and pages of a database.
    public func stat(_ db: DatabaseHandle) throws -> DatabaseStat {
        var s = MDB_stat()
        try check(mdb_stat(txn, MDB_dbi(db.dbi), &s), "mdb_stat \(db.name)")
        return DatabaseStat(
            entries: s.ms_entries, depth: Int(s.ms_depth),
            pages: s.ms_branch_pages + s.ms_leaf_pages + s.ms_overflow_pages, pageSize: Int(s.ms_psize))
    }

    /// The bytes of the pages on LMDB's free list in this snapshot (its database 0, as `mdb_stat -f` counts
    /// them): pages a later write reuses before it grows the file — once no reader still holds the snapshot
    /// that freed them. A compacting copy (`Environment.copy`) leaves them out.
    public func freeBytes() throws -> Int {
        var stat = MDB_stat()
        mdb_env_stat(environment.env, &stat)
        return try freePages() * Int(stat.ms_psize)
    }

    /// The pages on the free list (`freeBytes`).
    private func freePages() throws -> Int {
        try withCursor(DatabaseHandle(dbi: 0, name: "(free list)")) { cursor in
            var pages = 0
            var entry = try cursor.first()
            while let (_, value) = entry {
                // Each value is an ID list: its count (an `MDB_ID`, `size_t`), then the page numbers.
                guard value.count >= MemoryLayout<Int>.size else { break }
                pages += value.loadUnaligned(as: Int.self)
                entry = try cursor.next()
            }
            return pages
        }
    }

    /// Opens a cursor on `db`, valid inside `body`.
    public func withCursor<R>(_ db: DatabaseHandle, _ body: (Cursor) throws -> R) throws -> R {
        let cursor = try Cursor(txn: self, db: db)
        defer { cursor.close() }
        return try body(cursor)
    }

    /// Visits entries in key order from the first key ≥ `from` (or the first entry); stop by returning false.
    public func forEach(
        _ db: DatabaseHandle, from: [UInt8]? = nil,
        _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        try withCursor(db) { cursor in
            var entry = try from.map { try cursor.seek($0) } ?? cursor.first()
            while let (k, v) = entry {
                guard try body(k, v) else { return }
                entry = try cursor.next()
            }
        }
    }

    /// The last entry's key and value, copied; `nil` when the database is empty.
    public func last(_ db: DatabaseHandle) throws -> (key: [UInt8], value: [UInt8])? {
        try withCursor(db) { cursor in
            try cursor.last().map { (Array($0.0), Array($0.1)) }
        }
    }
}

/// The write transaction. Only one exists per environment at a time (across processes too).
public final class WriteTransaction: Transaction {
    /// A function that drops this process's mappings of the map's pages (`madvise(MADV_DONTNEED)`), as
    /// `Environment.releaseResidentPages` does, for use while this transaction writes: a long transaction
    /// that reads pages all over the file through the map (a checkpoint's puts) would otherwise hold
    /// every page it read in the process's RSS until it ends. Call it before the first put (it finds the
    /// map through a clean page); `nil` where that is not possible. Safe while the transaction goes on:
    /// its dirty pages are its own memory (no `MDB_WRITEMAP`), and a dropped page is faulted back from
    /// the page cache on the next read. Once the transaction has ended it does nothing (the map may
    /// have moved since).
    public func residentPageReleaser() -> (() -> Void)? {
        #if os(Linux)
            guard !finished, let (base, length) = Environment.map(seenBy: txn) else { return nil }
            return { [weak self] in
                guard let self, !self.finished else { return }
                _ = madvise(base, length, MADV_DONTNEED)
            }
        #else
            return nil
        #endif
    }

    /// How a put behaves for existing or out-of-order keys.
    public struct PutFlags: OptionSet, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// Fail with `keyExists` if the key is present.
        public static let noOverwrite = PutFlags(rawValue: UInt32(MDB_NOOVERWRITE))
        /// The key is greater than every key in the database (fast path for logs); else `keyExists`.
        public static let append = PutFlags(rawValue: UInt32(MDB_APPEND))
    }

    /// Opens (creating when `create`) the named database inside this transaction, so a layout of several
    /// databases can be created all at once. LMDB keeps the handle only if the transaction commits.
    public func openHandle(_ name: String, create: Bool = true) throws -> DatabaseHandle {
        var dbi: MDB_dbi = 0
        try check(mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi), "mdb_dbi_open \(name)")
        return DatabaseHandle(dbi: dbi, name: name)
    }

    /// Stores `value` under `key`.
    public func put(
        _ db: DatabaseHandle, key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, flags: PutFlags = []
    ) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(mdb_put(txn, MDB_dbi(db.dbi), &k, &v, flags.rawValue), "mdb_put \(db.name)")
    }

    /// Stores raw `value` under raw `key`.
    public func put(_ db: DatabaseHandle, key: [UInt8], value: [UInt8], flags: PutFlags = []) throws {
        try key.withUnsafeBytes { kb in
            try value.withUnsafeBytes { vb in try put(db, key: kb, value: vb, flags: flags) }
        }
    }

    /// Stores a typed value under a typed key.
    @inlinable
    public func put<K, V>(_ db: Database<K, V>, _ key: K.Item, _ value: V.Item, flags: PutFlags = []) throws {
        try put(db.handle, key: K.encoded(key), value: V.encoded(value), flags: flags)
    }

    /// Removes `key`; returns whether it was present.
    @discardableResult
    public func delete(_ db: DatabaseHandle, key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { kb in try delete(db, key: kb) }
    }

    /// Removes raw `key`; returns whether it was present.
    @discardableResult
    public func delete(_ db: DatabaseHandle, key: UnsafeRawBufferPointer) throws -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        let rc = mdb_del(txn, MDB_dbi(db.dbi), &k, nil)
        if rc == MDB_NOTFOUND { return false }
        try check(rc, "mdb_del \(db.name)")
        return true
    }

    /// Removes a typed key; returns whether it was present.
    @discardableResult
    public func delete<K, V>(_ db: Database<K, V>, _ key: K.Item) throws -> Bool {
        try delete(db.handle, key: K.encoded(key))
    }

    /// Removes every entry of `db` (the database stays open).
    public func clear(_ db: DatabaseHandle) throws {
        try check(mdb_drop(txn, MDB_dbi(db.dbi), 0), "mdb_drop \(db.name)")
    }
}

/// A position in a database, for ordered scans. Valid only inside `withCursor`.
public final class Cursor {
    @exclusivity(unchecked) private var cursor: OpaquePointer?  // one thread's, as its transaction
    private let db: DatabaseHandle
    /// Counts the moves (the cursor lives inside `withCursor`, within the transaction's lifetime).
    private unowned let txn: Transaction

    init(txn: Transaction, db: DatabaseHandle) throws {
        self.db = db
        self.txn = txn
        try check(mdb_cursor_open(txn.txn, MDB_dbi(db.dbi), &cursor), "mdb_cursor_open \(db.name)")
    }

    func close() {
        if let cursor { mdb_cursor_close(cursor) }
        cursor = nil
    }

    private func move(_ op: MDB_cursor_op, key: UnsafeRawBufferPointer? = nil) throws
        -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)?
    {
        var k = MDB_val(mv_size: key?.count ?? 0, mv_data: UnsafeMutableRawPointer(mutating: key?.baseAddress))
        var v = MDB_val()
        txn.cursorMoves += 1
        let rc = mdb_cursor_get(cursor, &k, &v, op)
        if rc == MDB_NOTFOUND { return nil }
        try check(rc, "mdb_cursor_get \(db.name)")
        return (
            UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size),
            UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
        )
    }

    /// Stores `value` under `key` (in a write transaction) and leaves the cursor on it. Puts in key order
    /// through one cursor let LMDB find each key's leaf from the cursor's page when it lies there, instead
    /// of searching from the root for every put as `mdb_put` does.
    public func put(key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) throws {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val(mv_size: value.count, mv_data: UnsafeMutableRawPointer(mutating: value.baseAddress))
        try check(mdb_cursor_put(cursor, &k, &v, 0), "mdb_cursor_put \(db.name)")
    }

    /// Removes `key` (in a write transaction); returns whether it was present.
    @discardableResult
    public func delete(key: UnsafeRawBufferPointer) throws -> Bool {
        var k = MDB_val(mv_size: key.count, mv_data: UnsafeMutableRawPointer(mutating: key.baseAddress))
        var v = MDB_val()
        let rc = mdb_cursor_get(cursor, &k, &v, MDB_SET)
        if rc == MDB_NOTFOUND { return false }
        try check(rc, "mdb_cursor_get \(db.name)")
        try check(mdb_cursor_del(cursor, 0), "mdb_cursor_del \(db.name)")
        return true
    }

    /// The first entry.
    public func first() throws -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)? { try move(MDB_FIRST) }
    /// The last entry.
    public func last() throws -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)? { try move(MDB_LAST) }
    /// The next entry.
    public func next() throws -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)? { try move(MDB_NEXT) }
    /// The previous entry.
    public func previous() throws -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)? {
        try move(MDB_PREV)
    }

    /// The first entry whose key is ≥ `key`.
    public func seek(_ key: [UInt8]) throws -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)? {
        // MDB_SET_RANGE points the key at the found entry (LMDB-owned), so the search key may be borrowed.
        try key.withUnsafeBytes { kb in try move(MDB_SET_RANGE, key: kb) }
    }

    /// The last entry whose key is ≤ `key`: one seek (`MDB_SET_RANGE`), then one step back unless the
    /// seek landed on `key` itself (or `MDB_LAST` when every key is smaller). O(log n) however many
    /// entries lie before it.
    public func lastAtOrBefore(_ key: [UInt8]) throws -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer)? {
        guard let found = try seek(key) else { return try last() }
        if found.0.elementsEqual(key) { return found }
        return try previous()
    }
}

/// A read transaction kept across many lookups: `reset` releases its snapshot (so the writer can commit
/// and grow the map), `renew` takes a fresh one. Saves a transaction begin and end per lookup on hot
/// paths; the owner must `reset` it before writing through the same environment.
public final class ReadSnapshot: Transaction {
    private var active = true

    /// Releases the snapshot; the handle stays for `renew`.
    public func reset() {
        guard active else { return }
        mdb_txn_reset(txn)
        active = false
    }

    /// Takes a fresh snapshot (seeing every commit so far).
    public func renew() throws {
        guard !active else { return }
        var rc = mdb_txn_renew(txn)
        if rc == MDB_MAP_RESIZED {
            try environment.adoptResize()
            rc = mdb_txn_renew(txn)
        }
        try check(rc, "mdb_txn_renew")
        active = true
    }

    deinit { abort() }
}

extension Environment {
    /// Begins a long-lived read snapshot (see `ReadSnapshot`).
    public func snapshot() throws -> ReadSnapshot {
        try ReadSnapshot(env: self, parent: nil, flags: UInt32(MDB_RDONLY))
    }
}
