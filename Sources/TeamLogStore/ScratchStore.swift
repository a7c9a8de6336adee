public import TeamLog

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A throwaway store in a temporary directory holding another store's log and projections as of an
/// earlier seq: what `--at SEQ` answers from, with the same queries (and the same index seeks) as a
/// live store. Written without fsync; its directory is removed by `remove()` or when it dies.
public final class ScratchStore {
    /// The store; query it like any other.
    public let store: Store
    /// Events replayed into it.
    public let events: Int
    /// The first problem met in the source's log, if any: the replay stopped before it.
    public let problem: Store.ChainProblem?
    /// The directory, removed with its files.
    public let path: String
    private var removed = false

    init(store: Store, events: Int, problem: Store.ChainProblem?, path: String) {
        self.store = store
        self.events = events
        self.problem = problem
        self.path = path
    }

    /// Closes the store and removes its directory.
    public func remove() {
        guard !removed else { return }
        removed = true
        store.close()
        Self.removeDirectory(path)
    }

    deinit { remove() }

    /// A new empty directory under `$TMPDIR` (or /tmp).
    static func makeDirectory() throws -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array("\(base)/teamlog-scratch-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw StoreError.system("cannot create a scratch directory in \(base)", call: "mkdtemp", path: base)
        }
        return String(cString: made)
    }

    /// Removes a store directory: its files (LMDB's two and the writer lock) and its projection
    /// environment's directory, then the directory.
    static func removeDirectory(_ path: String) {
        if let dir = opendir(path) {
            var names: [String] = []
            while let entry = readdir(dir) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
                }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(dir)
            for name in names where unlink(path + "/" + name) != 0 { removeDirectory(path + "/" + name) }
        }
        rmdir(path)
    }
}

extension Store {
    /// Replays this store's committed log from seq 1 (through `upTo` when given), verifying its hash chain,
    /// into a new scratch store: each event applied and committed through the writer's own path (apply,
    /// changed records, one transaction per `batchSize` events), so the scratch store's tables are the ones
    /// a writer that stopped at that seq would hold, unread indexes included. Memory holds the working
    /// state only: the index entries go to the scratch store's disk as they are made.
    ///
    /// `config` is the store's settings (`world.config` when nil): a thread other than the writer's passes
    /// the ones it read at open, so it never touches the writer's state.
    public func replayIntoScratch(upTo: UInt64? = nil, batchSize: Int = 8_192, config: Config? = nil) throws
        -> ScratchStore
    {
        let path = try ScratchStore.makeDirectory()
        var options = Options()
        options.noSync = true
        options.config = config ?? world.config
        options.verifyChainAtOpen = false
        options.mapSize = 64 << 20
        let scratch: Store
        do {
            scratch = try Store(path: path, options: options)
        } catch {
            ScratchStore.removeDirectory(path)
            throw error
        }
        scratch.wantsDeliveries = false
        var undecodable: ChainProblem?
        do {
            let walk = try env.read { txn in
                try walkChain(in: txn, upTo: upTo) { seq, payload in
                    guard undecodable == nil else { return }
                    let event: Event
                    do { event = try EventCodec.decode(seq: seq, payload) } catch {
                        undecodable = ChainProblem(seq: seq, message: "undecodable event: \(error)")
                        return
                    }
                    try scratch.applyReplayed(event)
                    if scratch.pendingCount >= batchSize { try scratch.commit() }
                }
            }
            try scratch.commit()
            let events = undecodable.map { Int($0.seq - 1) } ?? Int(walk.records)
            return ScratchStore(store: scratch, events: events, problem: undecodable ?? walk.problem, path: path)
        } catch {
            scratch.close()
            ScratchStore.removeDirectory(path)
            throw error
        }
    }
}
