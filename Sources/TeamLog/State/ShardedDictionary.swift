/// A key that names its shard by a cheap hash of its own, independent of `Hasher`'s.
public protocol ShardKey: Hashable, Sendable {
    /// Any well-mixed number derived from the key's identity (equal keys, equal numbers).
    var shardHash: UInt { get }
}

/// A dictionary split into `shardCount` dictionaries by `Key.shardHash`, for the tables whose size grows
/// with the traffic or the user base (messages, receipt tallies, users' conversations): a `Dictionary`
/// that grows doubles its storage and rehashes every entry at once — with a million resident messages
/// that was one 50–100 ms stall of the writer's thread, the stream's worst latency — while a shard holds
/// at most a 186th of the entries, so no insertion moves more than that. Reads and writes cost one cheap
/// hash and a table lookup more than a `Dictionary`'s. Iteration order is unspecified (as a
/// `Dictionary`'s).
///
/// The shards are of unequal sizes on purpose (`shardOfPrefix`): shard `s` takes a share proportional to
/// 2^(s/256), so the largest is twice the smallest. With equal shares every shard reached its growth
/// threshold within a few thousand insertions of the others — all 256 doubled (and the kernel zeroed
/// their new pages) in the same ~1 s, the same work as one big rehash, spread only over that second: at
/// 50,000 ops/s it cut the writer's rate by a quarter for 1.25 s and the stream's latency reached
/// 300–470 ms (BENCHMARKS, thirteenth session). With sizes spread over a factor of two, the shards cross
/// their thresholds one after another while the table doubles.
public struct ShardedDictionary<Key: ShardKey, Value: Sendable>: Sendable {
    public static var shardCount: Int { 256 }

    @usableFromInline var shards: [[Key: Value]]
    /// Entries over all shards, kept as they are added and removed (the working set reads it at every
    /// eviction step: a walk of 256 shards each time was 5% of the writer's thread during a sweep).
    @usableFromInline var entries = 0

    public init() {
        shards = Array(repeating: [:], count: Self.shardCount)
    }

    @inlinable @inline(__always)
    static func shard(of key: Key) -> Int {
        Int(shardOfPrefix[Int(truncatingIfNeeded: key.shardHash >> (UInt.bitWidth - shardPrefixBits))])
    }

    @inlinable
    public subscript(key: Key) -> Value? {
        get { shards[Self.shard(of: key)][key] }
        _modify {
            let s = Self.shard(of: key)
            let before = shards[s].count
            defer { entries += shards[s].count - before }
            yield &shards[s][key]
        }
        set {
            let s = Self.shard(of: key)
            let before = shards[s].count
            shards[s][key] = newValue
            entries += shards[s].count - before
        }
    }

    /// The value of `key`, or `defaultValue` — written in place, as `Dictionary`'s same subscript.
    @inlinable
    public subscript(key: Key, default defaultValue: @autoclosure () -> Value) -> Value {
        get { self[key] ?? defaultValue() }
        _modify {
            let s = Self.shard(of: key)
            let before = shards[s].count
            defer { entries += shards[s].count - before }
            yield &shards[s][key, default: defaultValue()]
        }
    }

    /// Calls `body` with the value of `key` in place (no copy, no move out and back) and returns what it
    /// returns; `nil` when the key is absent.
    @inlinable
    public mutating func withValue<R>(forKey key: Key, _ body: (inout Value) -> R) -> R? {
        let s = Self.shard(of: key)
        guard let index = shards[s].index(forKey: key) else { return nil }
        return body(&shards[s].values[index])
    }

    /// Whether `key` has a value (without copying the value out, as `self[key] != nil` does).
    @inlinable
    public func containsKey(_ key: Key) -> Bool { shards[Self.shard(of: key)].index(forKey: key) != nil }

    /// Removes the value of `key` and returns it.
    @inlinable @discardableResult
    public mutating func removeValue(forKey key: Key) -> Value? {
        let removed = shards[Self.shard(of: key)].removeValue(forKey: key)
        if removed != nil { entries -= 1 }
        return removed
    }

    /// Removes everything and frees the storage.
    public mutating func removeAll() {
        for s in shards.indices { shards[s] = [:] }
        entries = 0
    }

    /// Removes the entries `shouldRemove` picks, calling `removed` with the key of each, shard by shard.
    /// The values are visited in place (by index, through `modify`): iterating a `Dictionary` copies every
    /// value out, retaining and releasing each of its references (`filter` here was 8% of an audit's
    /// applying thread).
    public mutating func removeAll(where shouldRemove: (Key, inout Value) -> Bool, removed: (Key) -> Void) {
        removeAll(inShards: shards.indices, where: shouldRemove, removed: removed)
    }

    /// `removeAll(where:removed:)` over the shards in `range` only (of `0..<shardCount`): a caller that
    /// walks the whole table a few shards at a time.
    public mutating func removeAll(
        inShards range: Range<Int>, where shouldRemove: (Key, inout Value) -> Bool, removed: (Key) -> Void
    ) {
        var doomed: [Key] = []
        for s in range where !shards[s].isEmpty {
            doomed.removeAll(keepingCapacity: true)
            var i = shards[s].startIndex
            while i != shards[s].endIndex {
                let key = shards[s].keys[i]
                if shouldRemove(key, &shards[s].values[i]) { doomed.append(key) }
                shards[s].formIndex(after: &i)
            }
            for key in doomed {
                shards[s].removeValue(forKey: key)
                removed(key)
            }
            entries -= doomed.count
        }
    }

    /// Removes everything and frees the storage, first calling `visit` with every entry, its value in
    /// place (no copy out: see `removeAll(where:removed:)`), shard by shard.
    public mutating func removeAll(visiting visit: (Key, inout Value) -> Void) {
        for s in shards.indices where !shards[s].isEmpty {
            var i = shards[s].startIndex
            while i != shards[s].endIndex {
                visit(shards[s].keys[i], &shards[s].values[i])
                shards[s].formIndex(after: &i)
            }
            shards[s] = [:]
        }
        entries = 0
    }

    /// Entries held.
    @inlinable public var count: Int { entries }

    /// Entries held by one shard (of `0..<shardCount`).
    public func count(inShard shard: Int) -> Int { shards[shard].count }

    @inlinable public var isEmpty: Bool { entries == 0 }

    /// Every key, shard by shard.
    public var keys: some Sequence<Key> { shards.lazy.flatMap(\.keys) }

    /// Every value, shard by shard.
    public var values: some Sequence<Value> { shards.lazy.flatMap(\.values) }
}

/// Bits of `ShardKey.shardHash` (its top bits) that pick a shard through `shardOfPrefix`.
@usableFromInline let shardPrefixBits = 12

/// The shard of each `shardPrefixBits`-bit prefix of a key's `shardHash`: shard `s` of 256 gets the
/// prefixes `p` with 2^(s/256) ≤ 1 + (p + ½) / 4096 < 2^((s+1)/256) — a share proportional to 2^(s/256)
/// (11 to 22 of the 4,096 prefixes), so the shards' sizes spread over a factor of two (see
/// `ShardedDictionary`).
@usableFromInline let shardOfPrefix: [UInt8] = {
    let prefixes = 1 << shardPrefixBits
    var ratio = 2.0  // 2^(1/256): eight square roots of 2
    for _ in 0..<8 { ratio = ratio.squareRoot() }
    var table: [UInt8] = []
    table.reserveCapacity(prefixes)
    var shard = 0
    var upper = ratio  // 2^((shard+1)/256)
    for p in 0..<prefixes {
        let x = 1 + (Double(p) + 0.5) / Double(prefixes)
        while x >= upper && shard < 255 {
            shard += 1
            upper *= ratio
        }
        table.append(UInt8(shard))
    }
    return table
}()

extension ShardedDictionary: Sequence {
    public func makeIterator() -> some IteratorProtocol<(key: Key, value: Value)> {
        shards.lazy.flatMap { $0.lazy.map { (key: $0.key, value: $0.value) } }.makeIterator()
    }
}

extension ShardedDictionary: Equatable where Value: Equatable {
    /// Equal when they hold the same keys with equal values (equal keys share a shard).
    public static func == (a: Self, b: Self) -> Bool { a.shards == b.shards }
}

extension ShardedDictionary: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (Key, Value)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }
}

extension Id: ShardKey {
    /// `Id.bytesHash` of the id's bytes under a fixed seed (not the tables' seeds, so the shard does not
    /// predict the bucket within it).
    @inlinable
    public var shardHash: UInt { UInt(truncatingIfNeeded: Id.bytesHash(string, seed: 0x5bd1_e995_2f8c_a6d1)) }
}
