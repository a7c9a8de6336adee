internal import CLMDB
import TeamLogThreads

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An LMDB environment: one directory holding `data.mdb` and `lock.mdb`.
///
/// Owns the `MDB_env` handle and closes it in `deinit`. Transactions are scoped: `read { }` and
/// `write { }` commit on return and abort on throw. A write transaction stays on the calling thread for
/// its whole life (LMDB forbids a write transaction hopping threads), so keep `async` out of the bodies.
public final class Environment: @unchecked Sendable {
    /// How to open an environment.
    public struct Options: Sendable {
        /// Initial map size in bytes; the map grows on demand (see `write`).
        public var mapSize: Int = 1 << 20
        /// How many named databases may be opened.
        public var maxDatabases: Int = 32
        /// Reader slots (concurrent read transactions across all processes).
        public var maxReaders: Int = 126
        /// Skip fsync at commit: faster, but a crash may lose the last transactions (never corrupts).
        public var noSync: Bool = false
        /// Open without write access.
        public var readOnly: Bool = false
        /// Largest single growth step when the map is full.
        public var maxGrowthStep: Int = 1 << 30

        public init() {}
    }

    let env: OpaquePointer
    /// The directory of the environment.
    public let path: String
    /// The options it was opened with.
    public let options: Options
    /// Guards the map size: read transactions share it, a resize takes it alone (LMDB requires that no
    /// transaction of this process is active while `mdb_env_set_mapsize` runs).
    private let resizeLock: UnsafeMutablePointer<pthread_rwlock_t> = .allocate(capacity: 1)
    /// Guards `readAheadOn` and the map's advice (`setReadAhead`, and again after each remap).
    private let adviceLock: UnsafeMutablePointer<pthread_mutex_t> = .allocate(capacity: 1)
    /// Whether faults on the map read ahead (see `readAhead`).
    private var readAheadOn = true
    /// Stale reader slots found and cleared at open.
    public private(set) var staleReadersCleared: Int = 0
    /// The thread inside `write`, if any (to refuse a nested write instead of deadlocking).
    private var writerThread: pthread_t?
    /// How many times `write` grew the map.
    public private(set) var mapGrowths: Int = 0
    /// The data file's header as checked at open; `nil` when the file was missing or empty.
    public let header: DataFileHeader?

    /// Opens (creating when missing and writable) the environment in directory `path`.
    ///
    /// Reader slots left by dead processes are cleared at open (`mdb_reader_check`).
    public init(path: String, options: Options = Options()) throws {
        self.path = path
        self.options = options
        if !options.readOnly {
            if mkdir(path, 0o755) != 0 && errno != EEXIST {
                throw LMDBError(
                    code: .system(errno), message: String(cString: strerror(errno)), context: "mkdir \(path)")
            }
        }
        // LMDB trusts its header: a short file or a wild page number in a meta kills the process (SIGBUS,
        // SIGSEGV) once mapped. Check what can be checked cheaply before `mdb_env_open` maps it.
        header = try DataFileHeader.read(directory: path)
        if header == nil && options.readOnly {  // LMDB would map an empty file and read its meta past the end
            let missing = access(path + "/data.mdb", F_OK) != 0
            throw LMDBError(
                code: missing ? .system(ENOENT) : .invalid,
                message: missing ? String(cString: strerror(ENOENT)) : "an empty file, not an LMDB data file",
                context: "mdb_env_open \(path)")
        }
        var handle: OpaquePointer?
        try check(mdb_env_create(&handle), "mdb_env_create")
        guard let handle else { throw LMDBError(code: .panic, message: "no environment", context: "mdb_env_create") }
        env = handle
        resizeLock.initialize(to: pthread_rwlock_t())
        pthread_rwlock_init(resizeLock, nil)
        adviceLock.initialize(to: pthread_mutex_t())
        pthread_mutex_init(adviceLock, nil)
        // Every stored property is set from here on, so a throw releases `self` and `deinit` closes the
        // handle and destroys the lock; closing them here as well was a double free.
        // LMDB checks its pages with assertions and aborts the process on a damaged one (a page of zeros, a
        // flipped bit in a node header): before it does, say which file is damaged and what can be done.
        mdb_env_set_assert(env, reportDamagedPage)
        try check(mdb_env_set_maxdbs(env, MDB_dbi(options.maxDatabases)), "mdb_env_set_maxdbs")
        try check(mdb_env_set_maxreaders(env, UInt32(options.maxReaders)), "mdb_env_set_maxreaders")
        try check(mdb_env_set_mapsize(env, options.mapSize), "mdb_env_set_mapsize")
        var flags = UInt32(MDB_NOTLS)
        if options.noSync { flags |= UInt32(MDB_NOSYNC) }
        if options.readOnly { flags |= UInt32(MDB_RDONLY) }
        try reserveLockFile(directory: path, maxReaders: options.maxReaders)
        try check(mdb_env_open(env, path, flags, 0o644), "mdb_env_open \(path)")
        var dead: Int32 = 0
        try check(mdb_reader_check(env, &dead), "mdb_reader_check")
        staleReadersCleared = Int(dead)
    }

    deinit {
        mdb_env_close(env)
        pthread_rwlock_destroy(resizeLock)
        resizeLock.deallocate()
        pthread_mutex_destroy(adviceLock)
        adviceLock.deallocate()
    }

    // `mdb_env_info` and `mdb_env_stat` read the meta pages through the map: a remap on another thread
    // (`grow`, `adoptResize`) meanwhile unmaps them under the reader — a SIGSEGV in `mdb_env_info`, seen
    // when a writer's thread read `usedBytes` at a checkpoint while its checkpointer grew the map. The
    // getters hold the resize lock shared, as transactions do (glibc's rwlock prefers readers, so a
    // getter inside a transaction's `read` or `write` nests); `grow` and `coverLastPage`, which hold it
    // already, read the unlocked values.

    /// The current map size in bytes.
    public var mapSize: Int { whileMapped { mapSizeNow } }

    /// The last committed transaction's id: 0 when nothing was ever committed.
    public var lastTransactionID: Int {
        whileMapped {
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            return info.me_last_txnid
        }
    }

    /// Bytes of the map in use (last used page × page size).
    public var usedBytes: Int { whileMapped { usedBytesNow } }

    /// `body` with the resize lock held shared: no remap until it returns.
    private func whileMapped<R>(_ body: () -> R) -> R {
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        return body()
    }

    /// `mapSize`, for a caller that holds the resize lock.
    private var mapSizeNow: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// `usedBytes`, for a caller that holds the resize lock.
    private var usedBytesNow: Int {
        var info = MDB_envinfo()
        var stat = MDB_stat()
        mdb_env_info(env, &info)
        mdb_env_stat(env, &stat)
        return (info.me_last_pgno + 1) * Int(stat.ms_psize)
    }

    /// Drops this process's resident pages of the memory map (`madvise(MADV_DONTNEED)`), so a long scan
    /// does not keep every page it touched counted in the process's resident set, however large the
    /// file. Safe beside open transactions: LMDB maps the file read-only and shared and never rewrites a
    /// page a reader can see, so the next read of a page faults it in again, unchanged, from the page
    /// cache. Holds off a map resize meanwhile. Linux only (elsewhere it does nothing).
    public func releaseResidentPages() {
        #if os(Linux)
            pthread_rwlock_rdlock(resizeLock)
            defer { pthread_rwlock_unlock(resizeLock) }
            _ = adviseMap(MADV_DONTNEED)
        #endif
    }

    /// Whether a page fault on the map also reads the file around the page (the kernel's read-ahead,
    /// `MADV_NORMAL`: the default) or the page alone (`MADV_RANDOM`, what LMDB's `MDB_NORDAHEAD` sets at
    /// open — here changeable while open, and kept through the remaps of a growing map).
    ///
    /// Read-ahead serves a sequential walk and a cold start with room to cache the whole file. When the
    /// files are larger than the memory left for their pages (a memory cgroup's limit, or the machine's),
    /// B-tree reads are random and each fault's neighbours push pages that are still wanted out of the
    /// cache: ingesting 1M ops into a 5M-op store in a 1.5 GiB memory cgroup ran at 15,815 ops/s with
    /// read-ahead (46.5 s of system time in reclaim) and 44,965 without (BENCHMARKS, twenty-fifth session).
    public var readAhead: Bool {
        pthread_mutex_lock(adviceLock)
        defer { pthread_mutex_unlock(adviceLock) }
        return readAheadOn
    }

    /// Turns the map's read-ahead on or off (see `readAhead`); nothing when it already is. Linux only
    /// (elsewhere only the setting changes).
    public func setReadAhead(_ on: Bool) {
        pthread_rwlock_rdlock(resizeLock)  // no remap meanwhile
        defer { pthread_rwlock_unlock(resizeLock) }
        pthread_mutex_lock(adviceLock)
        defer { pthread_mutex_unlock(adviceLock) }
        guard on != readAheadOn else { return }
        if advise(readAhead: on) { readAheadOn = on }  // else the next call tries again
    }

    /// After a remap (a new mapping starts with the kernel's default advice): gives it the setting again.
    /// Call with the resize lock held.
    private func adviseRemappedMap() {
        pthread_mutex_lock(adviceLock)
        defer { pthread_mutex_unlock(adviceLock) }
        if !readAheadOn && !advise(readAhead: false) { readAheadOn = true }  // as the new map is
    }

    /// `madvise` of the whole map: read-ahead on (`MADV_NORMAL`) or off (`MADV_RANDOM`). Whether it was
    /// advised: not when the map cannot be found (no key in the main database yet) or `madvise` fails.
    /// Call with both locks held.
    private func advise(readAhead on: Bool) -> Bool {
        #if os(Linux)
            return adviseMap(on ? MADV_NORMAL : MADV_RANDOM)
        #else
            return true
        #endif
    }

    #if os(Linux)
        /// `madvise(advice)` of the whole map; whether it was given (not when the map cannot be found: no
        /// key in the main database yet). LMDB does not say where it mapped the file (`me_mapaddr` is only
        /// set for a fixed map): a pointer into the map (the main database's first key, in a read
        /// transaction) and the mapping that holds it from /proc/self/maps. Call with the resize lock held.
        private func adviseMap(_ advice: Int32) -> Bool {
            var txn: OpaquePointer?
            guard mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn) == 0, let txn else { return false }
            defer { mdb_txn_abort(txn) }
            guard let (base, length) = Self.map(seenBy: txn) else { return false }
            return madvise(base, length, advice) == 0
        }
    #endif

    #if canImport(Glibc)
        /// The address and length of the memory map `txn` reads, found through a clean page of it: the main
        /// database's first key, and the mapping of this process that holds it — checked to be a shared
        /// mapping of the environment's data file (same inode), so a key on a page the transaction has
        /// written (its own heap copy) gives `nil`, never a range of other memory to drop.
        static func map(seenBy txn: OpaquePointer) -> (UnsafeMutableRawPointer, Int)? {
            var fd: Int32 = -1
            var info = Glibc.stat()
            guard let env = mdb_txn_env(txn), mdb_env_get_fd(env, &fd) == 0, fd >= 0, fstat(fd, &info) == 0 else {
                return nil
            }
            var cursor: OpaquePointer?
            guard mdb_cursor_open(txn, 1, &cursor) == 0, let cursor else { return nil }  // 1: the main database
            defer { mdb_cursor_close(cursor) }
            var key = MDB_val()
            var value = MDB_val()
            guard mdb_cursor_get(cursor, &key, &value, MDB_FIRST) == 0, let inside = key.mv_data,
                let found = mapping(containing: UInt(bitPattern: inside)), found.shared,
                found.inode == UInt64(info.st_ino),
                let base = UnsafeMutableRawPointer(bitPattern: found.start)
            else { return nil }
            return (base, Int(found.end - found.start))
        }
    #endif

    /// The mapping of this process that holds `address` (from /proc/self/maps): its range, whether it is
    /// shared, and the inode of the file it maps (0 for anonymous memory).
    static func mapping(containing address: UInt) -> (start: UInt, end: UInt, shared: Bool, inode: UInt64)? {
        guard let file = fopen("/proc/self/maps", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            // "start-end perms offset dev inode path", addresses in hex, the inode in decimal.
            var end: UnsafeMutablePointer<CChar>?
            let start = UInt(strtoull(line, &end, 16))
            guard let dash = end, dash.pointee == CChar(UInt8(ascii: "-")) else { continue }
            var afterStop: UnsafeMutablePointer<CChar>?
            let stop = UInt(strtoull(dash + 1, &afterStop, 16))
            guard start <= address && address < stop, var field = afterStop else { continue }
            // perms (4 characters after a space: "r--s"), then offset, dev, inode.
            field += 1
            let shared = field[3] == CChar(UInt8(ascii: "s"))
            var inode: UInt64 = 0
            var column = 0
            var cursor = field
            while cursor.pointee != 0 && column < 3 {
                if cursor.pointee == CChar(UInt8(ascii: " ")) { column += 1 }
                cursor += 1
            }
            if column == 3 { inode = UInt64(strtoull(cursor, nil, 10)) }
            return (start, stop, shared, inode)
        }
        return nil
    }

    /// Runs `body` — a `write` — with `MDB_NOSYNC` set for it: its commit leaves the pages it wrote (data
    /// and meta) in the page cache, unsynced, for `flushDataFile` to write out at its own pace. Until that
    /// returns, a power loss may leave the new meta on disk without the pages it names: the caller must
    /// be able to fall back to the previous meta (`DataFileHeader.rollBackUnflushedMeta`). A process crash
    /// loses nothing (the page cache has it all). Only for an environment with one writing thread at a
    /// time: the flag is the environment's.
    public func withUnsyncedCommit<R>(_ body: () throws -> R) throws -> R {
        guard !options.noSync else { return try body() }
        try check(mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 1), "mdb_env_set_flags NOSYNC")
        defer { mdb_env_set_flags(env, UInt32(MDB_NOSYNC), 0) }
        return try body()
    }

    /// Makes every committed page of the data file durable, writing the dirty ones out range by range
    /// (`rangeBytes` of the file at a time, each waited for) and then `fdatasync`: the writeback of an
    /// unsynced commit spread over many small requests, so that another file's `fdatasync` on the same
    /// device (the log's group commits) waits behind one range, not behind the whole commit — a 1-s
    /// checkpoint writes ~200 MB of B-tree pages (BENCHMARKS, twenty-second session). Nothing when the
    /// environment is `noSync`.
    public func flushDataFile(rangeBytes: Int = 4 << 20) throws {
        guard !options.noSync else { return }
        var fd: Int32 = -1
        try check(mdb_env_get_fd(env, &fd), "mdb_env_get_fd")
        let length = Int(fileLength(fd) ?? 0)
        var offset = 0
        while offset < length {
            // A file system without it (EINVAL, ENOSYS) or a pipe (ESPIPE): the `fdatasync` below does it all.
            if clmdb_write_range(fd, Int64(offset), Int64(rangeBytes)) != 0 { break }
            offset += rangeBytes
        }
        try syncData(fd, path: path)
    }

    /// Flushes buffers to disk (useful with `noSync`).
    public func sync(force: Bool = true) throws {
        try check(mdb_env_sync(env, force ? 1 : 0), "mdb_env_sync")
    }

    /// Copies the environment to the existing directory `path` as `data.mdb`: one read snapshot of every
    /// database, compacted (live pages only, renumbered; its one transaction has id 1), written beside a
    /// writer that goes on committing (which cannot reuse the pages freed meanwhile: the file may grow
    /// while the copy runs).
    ///
    /// The copy is written to `data.mdb.partial` (which must not exist), synced, renamed to `data.mdb` and
    /// the directory synced: `data.mdb` appears whole or not at all, whenever the process dies. LMDB's
    /// copy writes into a pipe and this thread writes the file, pushing each `rangeBytes` of it to the disk
    /// and waiting for it (`sync_file_range`, as `flushDataFile` does) — so another file's `fdatasync` on
    /// the same device (a live writer's log commits) waits behind one range, never behind the whole copy
    /// left in the page cache (a 290 MB copy's closing `fdatasync` stopped a 50,000 ops/s stream for
    /// 56 ms). A map another process grew meanwhile (`MDB_MAP_RESIZED` as the copy begins) is adopted and
    /// the copy started again. Readable in another process as it is written, so a caller can watch its
    /// size for progress (`copyInProgress(in:)`).
    ///
    /// `durable` false (a throwaway copy: a scratch store's starting point): `data.mdb` written directly
    /// and left in the page cache, neither pushed out nor synced (its reading still releases the map).
    public func copy(to path: String, rangeBytes: Int = 4 << 20, durable: Bool = true) throws {
        let target = durable ? Self.copyInProgress(in: path) : path + "/data.mdb"
        for attempt in 1...4 {
            let fd = try createNewFile(target)
            var isOpen = true
            defer { if isOpen { close(fd) } }
            do {
                guard durable else { return try copyPaced(into: fd, path: target, rangeBytes: nil) }
                try copyPaced(into: fd, path: target, rangeBytes: rangeBytes)
                try syncData(fd, path: target)
                isOpen = false
                guard close(fd) == 0 else { throw systemError("close \(target)") }
                guard rename(target, path + "/data.mdb") == 0 else { throw systemError("rename \(target)") }
                try syncDirectoryEntries(path)
                return
            } catch let error as LMDBError where error.code == .mapResized && attempt < 4 {
                unlink(target)
                pthread_rwlock_rdlock(resizeLock)
                defer { pthread_rwlock_unlock(resizeLock) }
                try adoptResize()
            } catch {
                unlink(target)
                throw error
            }
        }
    }

    /// `mdb_env_copyfd2` (compacting) on a second thread into a pipe, which this thread drains into `fd`,
    /// written out and waited for `rangeBytes` at a time (`nil`: left in the page cache). The map size is
    /// held meanwhile, as by `read`.
    private func copyPaced(into fd: Int32, path: String, rangeBytes: Int?) throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw systemError("pipe") }
        let (reader, writer) = (ends[0], ends[1])
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var readerOpen = true
        defer { if readerOpen { close(reader) } }
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        let env = self.env
        let copy = CopyOutcome()
        let thread = startThread(name: "lmdb-copy") {
            // A write into a pipe whose reader gave up fails with EPIPE here instead of killing the process.
            var pipeSignal = sigset_t()
            sigemptyset(&pipeSignal)
            sigaddset(&pipeSignal, SIGPIPE)
            pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)
            copy.code = mdb_env_copyfd2(env, writer, UInt32(MDB_CP_COMPACT))
            close(writer)
        }
        guard let thread else {
            // No thread to be had: the copy goes straight to the file, unpaced (its closing sync writes it).
            close(writer)
            return try check(mdb_env_copyfd2(env, fd, UInt32(MDB_CP_COMPACT)), "mdb_env_copyfd2 \(path)")
        }
        // The copy reads every live page through this process's map: released every 16 MiB written, so its
        // resident set stays at a few ranges, not the size of the environment (a 627 MB store's backup
        // peaked at 611 MB before, 182 MB releasing every 64 MiB, 87 MB every 16, in the same time).
        let written = drainCopy(reader, into: fd, path: path, rangeBytes: rangeBytes) { releaseResidentPages() }
        close(reader)
        readerOpen = false
        thread.join()
        // The drain's failure first: a copy that failed writing to a reader who gave up says only EPIPE.
        _ = try written.get()
        try check(copy.code, "mdb_env_copyfd2 \(path)")
    }

    /// The file `copy(to: path)` writes before renaming it `data.mdb`.
    public static func copyInProgress(in path: String) -> String { path + "/data.mdb.partial" }

    /// Opens (creating when `create` and writable) the named database.
    public func open<K, V>(_ name: String, create: Bool = true, as: Database<K, V>.Type = Database<K, V>.self)
        throws -> Database<K, V>
    {
        Database(try openHandle(name, create: create))
    }

    /// Opens (creating when `create` and writable) the named database, untyped.
    public func openHandle(_ name: String, create: Bool = true) throws -> DatabaseHandle {
        let flags = (create && !options.readOnly) ? UInt32(MDB_CREATE) : 0
        let run = { (txn: Transaction) throws -> DatabaseHandle in
            var dbi: MDB_dbi = 0
            try check(mdb_dbi_open(txn.txn, name, flags, &dbi), "mdb_dbi_open \(name)")
            return DatabaseHandle(dbi: dbi, name: name)
        }
        guard options.readOnly else { return try write { (txn: WriteTransaction) in try run(txn) } }
        // Not `read`: it aborts, and LMDB closes a handle opened in a transaction that does not commit
        // (every later use of it failed with EINVAL). A read-only transaction may commit.
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        let txn = try Transaction(env: self, parent: nil, flags: UInt32(MDB_RDONLY))
        defer { txn.abort() }
        let handle = try run(txn)
        try txn.commit()
        return handle
    }

    /// Runs `body` in a read-only snapshot. Bytes borrowed inside must not escape it.
    public func read<R>(_ body: (Transaction) throws -> R) throws -> R {
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        let txn = try Transaction(env: self, parent: nil, flags: UInt32(MDB_RDONLY))
        defer { txn.abort() }
        return try body(txn)
    }

    /// Runs `body` in `snapshot` renewed to the latest commit, and resets it afterwards (as `read` does, with
    /// the map size held meanwhile): a read transaction that keeps its reader slot between calls, so a
    /// thread that reads often (the working set's loader) skips taking a slot from the lock table each
    /// time. `snapshot` starts as `nil` and is made on the first call.
    public func read<R>(reusing snapshot: inout ReadSnapshot?, _ body: (Transaction) throws -> R) throws -> R {
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        if let snapshot { try snapshot.renew() } else { snapshot = try self.snapshot() }
        defer { snapshot?.reset() }
        return try body(snapshot!)
    }

    /// Runs `body` in a read-only snapshot on a second thread while this process already has a
    /// transaction open: `nil`, without running `body`, when another process grew the map since (adopting
    /// the new size would remap the file under the open transaction).
    public func concurrentRead<R>(_ body: (Transaction) throws -> R) throws -> R? {
        pthread_rwlock_rdlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        let txn: Transaction
        do {
            txn = try Transaction(env: self, parent: nil, flags: UInt32(MDB_RDONLY), adoptResize: false)
        } catch let error as LMDBError where error.code == .mapResized {
            return nil
        }
        defer { txn.abort() }
        return try body(txn)
    }

    /// Runs `body` in the write transaction and commits on return; aborts on throw.
    ///
    /// When the map is full (`MDB_MAP_FULL`, raised by a put or at commit) the transaction is aborted, the
    /// map grows (doubling, at most `maxGrowthStep` at a time) and `body` runs again from the start, so
    /// `body` must only write through `txn` and compute from state it does not change.
    public func write<R>(_ body: (WriteTransaction) throws -> R) throws -> R {
        precondition(!options.readOnly, "write on a read-only environment")
        // LMDB's writer lock does not nest: a second write on the thread that holds it would wait forever.
        if writerThread.map({ pthread_equal($0, pthread_self()) != 0 }) == true {
            throw LMDBError(
                code: .busy,
                message: "a write transaction is already open on this thread (writes do not nest; "
                    + "open database handles before the write)", context: "write")
        }
        writerThread = pthread_self()
        defer { writerThread = nil }
        while true {
            let txn: WriteTransaction
            do {
                pthread_rwlock_rdlock(resizeLock)
                defer { pthread_rwlock_unlock(resizeLock) }
                txn = try WriteTransaction(env: self, parent: nil, flags: 0)
                do {
                    let result = try body(txn)
                    try txn.commit()
                    coverLastPage()
                    return result
                } catch let error as LMDBError where error.code == .mapFull {
                    txn.abort()
                } catch {
                    txn.abort()
                    throw error
                }
            }
            try grow()
        }
    }

    /// Whether `data.mdb` was removed (unlinked) while open: writes to it still succeed, into a file that no
    /// path names any more and that is gone with the process.
    public var dataFileIsUnlinked: Bool {
        var fd: Int32 = -1
        guard mdb_env_get_fd(env, &fd) == 0, fd >= 0 else { return false }
        #if canImport(Glibc)
            var info = Glibc.stat()
        #else
            var info = Darwin.stat()
        #endif
        return fstat(fd, &info) == 0 && info.st_nlink == 0
    }

    /// Extends `data.mdb` to cover every page the new meta counts as in use.
    ///
    /// LMDB does not write pages a transaction allocated and freed again ("loose" pages), so a sound file
    /// can end before its last page; the open-time check (`DataFileHeader`) would take that for a
    /// truncation. Zero-filling the gap (sparse, no data written) keeps that check exact.
    private func coverLastPage() {
        var fd: Int32 = -1
        guard mdb_env_get_fd(env, &fd) == 0, fd >= 0 else { return }
        var info = MDB_envinfo()
        var pages = MDB_stat()
        mdb_env_info(env, &info)
        mdb_env_stat(env, &pages)
        let needed = off_t((info.me_last_pgno + 1) * Int(pages.ms_psize))
        if let size = fileLength(fd), size < needed { _ = ftruncate(fd, needed) }
    }

    /// Doubles the map (bounded by `maxGrowthStep`), with no transaction of this process active.
    private func grow() throws {
        pthread_rwlock_wrlock(resizeLock)
        defer { pthread_rwlock_unlock(resizeLock) }
        let current = mapSizeNow
        let next = current + min(max(current, 1 << 20), options.maxGrowthStep)
        try check(mdb_env_set_mapsize(env, next), "mdb_env_set_mapsize \(next)")
        mapGrowths += 1
        adviseRemappedMap()
    }

    /// Adopts a map size grown by another process (`MDB_MAP_RESIZED` at transaction begin).
    func adoptResize() throws {
        // Caller holds the shared lock; LMDB allows size 0 ("adopt the file's size") only with no
        // transaction active, which holds for this process at begin.
        try check(mdb_env_set_mapsize(env, 0), "mdb_env_set_mapsize 0")
        adviseRemappedMap()
    }

    /// Entries, depth and pages of one database.
    public func stat(_ db: DatabaseHandle) throws -> DatabaseStat {
        try read { txn in try txn.stat(db) }
    }
}

/// Counters of one database (`MDB_stat`).
public struct DatabaseStat: Sendable, Equatable {
    /// Number of entries.
    public var entries: Int
    /// B-tree depth.
    public var depth: Int
    /// Pages in use: branch + leaf + overflow.
    public var pages: Int
    /// Page size in bytes.
    public var pageSize: Int
}

/// Creates `path`, which must not exist, for writing; its descriptor.
private func createNewFile(_ path: String) throws -> Int32 {
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw systemError("open \(path)") }
    return fd
}

extension Environment {
    /// Swaps the names of directories `a` and `b` in one step (`renameat2` with `RENAME_EXCHANGE`, Linux
    /// only: elsewhere it fails with ENOSYS) and syncs `parent`, the directory holding both: whenever the
    /// process dies, each name holds one whole directory. Replaces a store by its compacted copy while
    /// readers that have the old one open go on reading its files.
    public static func exchangeDirectories(_ a: String, _ b: String, parent: String) throws {
        guard clmdb_exchange_paths(a, b) == 0 else {
            #if !os(Linux)
                errno = ENOSYS
            #endif
            throw systemError("exchange \(a) and \(b)")
        }
        try syncDirectoryEntries(parent)
    }

    /// Syncs a directory's entries (names created, renamed or removed in it).
    public static func syncDirectory(_ path: String) throws { try syncDirectoryEntries(path) }
}

/// Syncs a directory's entries (`fsync`: `fdatasync` on a directory is not allowed everywhere).
private func syncDirectoryEntries(_ path: String) throws {
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { throw systemError("open \(path)") }
    defer { close(fd) }
    while fsync(fd) != 0 { guard errno == EINTR else { throw systemError("fsync \(path)") } }
}

/// The last system call's failure (`errno`), with what was being done.
private func systemError(_ context: String) -> LMDBError {
    LMDBError(code: .system(errno), message: String(cString: strerror(errno)), context: context)
}

/// Writes what arrives on `reader` into `fd` from offset 0 until the pipe ends, pushing every `rangeBytes`
/// out to the disk and waiting for it (`nil`: not at all; `Environment.copy(to:rangeBytes:durable:)`),
/// and calling `release` every `releaseEvery` bytes; the bytes written, or the first failure. Drains the
/// pipe to its end whatever fails: the copying thread must never write into a pipe without a reader
/// (SIGPIPE).
private func drainCopy(
    _ reader: Int32, into fd: Int32, path: String, rangeBytes: Int?, releaseEvery: Int = 16 << 20,
    release: () -> Void
) -> Result<Int, any Error> {
    var released = 0
    var failure: (any Error)?
    var offset = 0
    var flushed = 0
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    var failedReads = 0
    while true {
        let n = buffer.withUnsafeMutableBytes { read(reader, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n < 0 {
            // Not expected of a pipe; the copy is failed, but reading goes on to the end (the copying
            // thread may be blocked on a full pipe). A pipe that keeps failing ends the drain after a
            // bound: the caller then closes the reader, so the copying thread's next write fails (EPIPE;
            // SIGPIPE is blocked on that thread) and the join returns.
            failure = failure ?? systemError("read the copy's pipe")
            failedReads += 1
            if failedReads >= 1000 { break }
            continue
        }
        failedReads = 0
        if n == 0 { break }
        guard failure == nil else { continue }
        var done = 0
        while done < n {
            let w = buffer.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, n - done, off_t(offset + done)) }
            if w < 0 && errno == EINTR { continue }
            if w <= 0 {
                failure = systemError("write \(path)")
                break
            }
            done += w
        }
        offset += done
        if let rangeBytes, failure == nil && offset - flushed >= rangeBytes {
            // Where the file system has no such call, the closing `fdatasync` writes it all.
            _ = clmdb_write_range(fd, Int64(flushed), Int64(offset - flushed))
            flushed = offset
        }
        if offset - released >= releaseEvery {
            release()
            released = offset
        }
    }
    return failure.map { .failure($0) } ?? .success(offset)
}

/// What the copying thread of `Environment.copy(to:rangeBytes:durable:)` returned (read after joining it).
private final class CopyOutcome: @unchecked Sendable {
    var code: Int32 = 0
}

/// LMDB sizes a new `lock.mdb` with `ftruncate` — a sparse file — and writes its reader table through
/// a shared map: on a full disk the first store into the map is a SIGBUS that kills the process (a
/// new store, or a reader of a copy without a lock file, on a full file system). Giving the file its
/// blocks first (`posix_fallocate`) turns that into ENOSPC, an error. The size is the one LMDB gives
/// it — a 192-byte header (three cache lines on x86-64 glibc) and a 64-byte slot per reader after the
/// first: 8,192 bytes for 126 readers, as LMDB's own files here measure —, so LMDB finds the file as
/// large as it needs and counts the same reader slots from its size as every other process does.
/// (Where the header is larger, LMDB extends the file itself: only its last slot is left sparse.) Only
/// a new, empty file is sized: one in use is never changed under the processes that mapped it. A file
/// that cannot be opened for writing is left to LMDB (a read-only file system: it runs without locks).
func reserveLockFile(directory: String, maxReaders: Int) throws {
    let lock = directory + "/lock.mdb"
    let fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard fd >= 0 else { return }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0 else { return }
    guard st.st_size == 0 else { return }
    let rc = posix_fallocate(fd, 0, off_t((max(maxReaders, 1) - 1) * 64 + 192))
    if rc == ENOSPC || rc == EDQUOT {
        _ = ftruncate(fd, 0)  // as LMDB would find it: an empty file it sizes itself
        throw LMDBError(
            code: .system(rc),
            message: "its lock file lock.mdb could not be given its blocks: \(String(cString: strerror(rc)))",
            context: "mdb_env_open \(directory)")
    }
}

/// LMDB's assertion hook (`mdb_env_set_assert`): says which file holds the damaged page, then LMDB aborts.
private func reportDamagedPage(_ env: OpaquePointer?, _ message: UnsafePointer<CChar>?) {
    var path: UnsafePointer<CChar>?
    if let env { _ = mdb_env_get_path(env, &path) }
    let directory = path.map { String(cString: $0) } ?? "?"
    // A store's projections live in its `proj/` environment: a cache of the log, rebuilt by a repair.
    let advice =
        directory.hasSuffix("/proj")
        ? "these are the store's projections, a cache of its log: `teamlog repair` rebuilds them from the log"
        : "if this is a store's log, restore the store from a copy (`teamlog log` exports the events before the "
            + "damaged page, up to where it stops)"
    let text =
        "teamlog: LMDB found a damaged page in \(directory)/data.mdb (\(message.map { String(cString: $0) } ?? "an assertion")) "
        + "and stops the process; \(advice)\n"
    _ = text.withCString { write(2, $0, strlen($0)) }
}
