internal import CNATS

// Design: a `KeyValue` owns a libnats `kvStore` (destroyed in `deinit`) over a JetStream context it keeps
// alive. Values are bytes; every write answers the entry's new revision (its stream sequence). The two
// conditional writes — `create` (only when the key has no value) and `update` (only when its revision is
// still `last`) — answer `nil` when the condition failed, which is the whole point of a compare-and-set:
// the caller lost a race and reads the key again. libnats reports a failed condition only as an error
// text, so the wrapper tells it from a real failure by reading the key back: if the key now holds
// something other than what the condition expected, the condition failed; otherwise the error stands.

/// A JetStream key-value bucket: values by key, with revisions and compare-and-set writes.
public final class KeyValue: @unchecked Sendable {
    /// A bucket to create when absent.
    public struct Config: Sendable {
        /// The bucket's name (letters, digits, `_`, `-`); its stream is `KV_<name>`.
        public var bucket: String
        /// The bucket's description, kept by the server.
        public var description: String?
        /// How many servers keep a copy.
        public var replicas = 1
        /// Values kept per key (1: the last only).
        public var history = 1

        /// A bucket named `bucket` with the defaults above.
        public init(bucket: String) { self.bucket = bucket }
    }

    /// A key's current value and its revision.
    public struct Entry: Sendable, Equatable {
        /// The value's bytes.
        public var value: [UInt8]
        /// The revision that wrote it (its stream sequence); what `update` compares.
        public var revision: UInt64
        /// When it was written, in nanoseconds since the epoch (the server's clock).
        public var createdNs: Int64 = 0

        /// An entry with these fields (for comparisons in tests).
        public init(value: [UInt8], revision: UInt64, createdNs: Int64 = 0) {
            self.value = value
            self.revision = revision
            self.createdNs = createdNs
        }
    }

    /// The bucket's name.
    public let bucket: String
    private let kv: OpaquePointer
    private let js: JetStream

    init(js: JetStream, bucket: String, kv: OpaquePointer) {
        self.js = js
        self.bucket = bucket
        self.kv = kv
    }

    deinit { kvStore_Destroy(kv) }

    /// The key's value, or nil when it has none (never written, deleted or purged).
    public func get(_ key: String) throws -> Entry? {
        var entry: OpaquePointer?
        let status = kvStore_Get(&entry, kv, key)
        if status == NATS_NOT_FOUND { return nil }
        try check(status, "kvStore_Get \(bucket) \(key)")
        guard let entry else { return nil }
        defer { kvEntry_Destroy(entry) }
        let count = Int(kvEntry_ValueLen(entry))
        let bytes: [UInt8] =
            if count > 0, let base = kvEntry_Value(entry) {
                Array(UnsafeRawBufferPointer(start: base, count: count))
            } else { [] }
        return Entry(value: bytes, revision: kvEntry_Revision(entry), createdNs: kvEntry_Created(entry))
    }

    /// Writes `value` under `key` whatever it holds; answers the new revision.
    @discardableResult
    public func put(_ key: String, _ value: [UInt8]) throws -> UInt64 {
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Put(&revision, kv, key, $0.baseAddress, Int32($0.count)) }
        try check(status, "kvStore_Put \(bucket) \(key)")
        return revision
    }

    /// Writes `value` under `key` only if the key has no value; answers the new revision, or nil when the
    /// key has one (another writer was first).
    public func create(_ key: String, _ value: [UInt8]) throws -> UInt64? {
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes { kvStore_Create(&revision, kv, key, $0.baseAddress, Int32($0.count)) }
        if status == NATS_OK { return revision }
        let failure = NATSError.from(status, "kvStore_Create \(bucket) \(key)")
        if (try? get(key)) != nil { return nil }
        throw failure
    }

    /// Writes `value` under `key` only if its revision is still `last`; answers the new revision, or nil
    /// when the key changed since (or is gone).
    public func update(_ key: String, _ value: [UInt8], last: UInt64) throws -> UInt64? {
        var revision: UInt64 = 0
        let status = value.withUnsafeBytes {
            kvStore_Update(&revision, kv, key, $0.baseAddress, Int32($0.count), last)
        }
        if status == NATS_OK { return revision }
        let failure = NATSError.from(status, "kvStore_Update \(bucket) \(key)")
        let now: Entry?
        do { now = try get(key) } catch { throw failure }
        guard let now else { return nil }  // gone: not the revision expected either
        if now.revision != last { return nil }
        throw failure
    }

    /// Deletes the key's value (a delete marker; `create` succeeds on it again).
    public func delete(_ key: String) throws {
        try check(kvStore_Delete(kv, key), "kvStore_Delete \(bucket) \(key)")
    }
}

extension JetStream {
    /// The bucket named `bucket` if it exists (nil when not: nothing is created — for readers).
    public func existingKeyValue(_ bucket: String) throws -> KeyValue? {
        var handle: OpaquePointer?
        let status = js_KeyValue(&handle, ctx, bucket)
        if status == NATS_OK, let handle { return KeyValue(js: self, bucket: bucket, kv: handle) }
        if status == NATS_NOT_FOUND { return nil }
        try check(status, "js_KeyValue \(bucket)")
        return nil
    }

    /// The bucket `config.bucket`, created with `config` when absent (an existing one is used as it is).
    public func keyValue(_ config: KeyValue.Config) throws -> KeyValue {
        if let existing = try existingKeyValue(config.bucket) { return existing }
        let arena = CStringArena()
        var cfg = kvConfig()
        try check(kvConfig_Init(&cfg), "kvConfig_Init")
        cfg.Bucket = arena(config.bucket)
        cfg.Description = arena.optional(config.description)
        cfg.History = UInt8(clamping: config.history)
        cfg.Replicas = Int32(config.replicas)
        cfg.StorageType = js_FileStorage
        var created: OpaquePointer?
        let createStatus = js_CreateKeyValue(&created, ctx, &cfg)
        withExtendedLifetime(arena) {}
        if createStatus != NATS_OK {
            let failure = NATSError.from(createStatus, "js_CreateKeyValue \(config.bucket)")
            // Another process created it meanwhile (with another configuration the server refuses ours).
            var again: OpaquePointer?
            if js_KeyValue(&again, ctx, config.bucket) == NATS_OK, let again {
                return KeyValue(js: self, bucket: config.bucket, kv: again)
            }
            throw failure
        }
        guard let created else {
            throw NATSError(code: .illegalState, message: "no bucket", context: "js_CreateKeyValue \(config.bucket)")
        }
        return KeyValue(js: self, bucket: config.bucket, kv: created)
    }
}
