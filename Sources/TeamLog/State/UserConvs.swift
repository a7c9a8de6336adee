/// One user's conversation views, by conversation: a plain array of entries while they are few (most
/// users have a handful: their teams and some p2p chats), a dictionary beyond `largeCount`.
///
/// A `Dictionary` per user cost about twice what its entries hold: a storage object with a 64-byte header,
/// a power-of-two table at most three quarters full (two buckets for one entry, eight for five), so a
/// heap profile of a 5M-event audit had these dictionaries at ~120 MB for ~60 MB of entries. An array
/// grown one entry at a time costs a 32-byte header and the entries. A lookup scans at most `largeCount`
/// keys; a user with many conversations (a service account with thousands of p2p chats) gets a hash
/// table, so no access is O(conversations) beyond that bound.
///
/// Order is not kept and does not matter: equality is equality of the key → value maps.
public struct UserConvs: Sendable, Sequence, Equatable, ExpressibleByDictionaryLiteral {
    public typealias Element = (key: ConvKey, value: UserConv)

    /// Above this many entries the views are a dictionary.
    static let largeCount = 16
    /// A dictionary that shrinks to this many entries becomes an array again (below `largeCount`, so
    /// a user at the boundary does not convert on every join and leave).
    static let smallCount = 8

    fileprivate struct Entry: Sendable {
        var key: ConvKey
        var value: UserConv
    }

    private enum Storage: Sendable {
        case small([Entry])
        case large([ConvKey: UserConv])
    }

    private var storage: Storage = .small([])

    public init() {}

    public init(dictionaryLiteral elements: (ConvKey, UserConv)...) {
        for (key, value) in elements { self[key] = value }
    }

    public var count: Int {
        switch storage {
        case .small(let entries): entries.count
        case .large(let table): table.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// Whether there is a view of `key` (without copying it out).
    public func contains(_ key: ConvKey) -> Bool {
        switch storage {
        case .small(let entries): entries.contains { $0.key == key }
        case .large(let table): table.index(forKey: key) != nil
        }
    }

    /// The view of `key`; setting `nil` removes it.
    public subscript(key: ConvKey) -> UserConv? {
        get {
            switch storage {
            case .small(let entries):
                for entry in entries where entry.key == key { return entry.value }
                return nil
            case .large(let table):
                return table[key]
            }
        }
        set {
            if let newValue {
                upsert(key, default: newValue) { $0 = newValue }
            } else {
                removeValue(forKey: key)
            }
        }
    }

    /// The view of `key`, or `initial` (added when set).
    public subscript(key: ConvKey, default initial: @autoclosure () -> UserConv) -> UserConv {
        get { self[key] ?? initial() }
        set { self[key] = newValue }
    }

    /// Runs `change` on the view of `key` in place; its result, or `nil` (and nothing runs) when there is none.
    @discardableResult
    public mutating func modify<R>(_ key: ConvKey, _ change: (inout UserConv) -> R) -> R? {
        switch storage {
        case .small(var entries):
            guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
            storage = .small([])  // `entries` is the only reference while it changes (no copy)
            defer { storage = .small(entries) }
            return change(&entries[index].value)
        case .large(var table):
            guard let index = table.index(forKey: key) else { return nil }
            storage = .small([])
            defer { storage = .large(table) }
            return change(&table.values[index])
        }
    }

    /// Runs `change` on the view of `key` in place, adding `initial` first when there is none; whether it
    /// was added.
    @discardableResult
    public mutating func upsert(
        _ key: ConvKey, default initial: @autoclosure () -> UserConv, _ change: (inout UserConv) -> Void
    )
        -> Bool
    {
        switch storage {
        case .small(var entries):
            storage = .small([])
            if let index = entries.firstIndex(where: { $0.key == key }) {
                change(&entries[index].value)
                storage = .small(entries)
                return false
            }
            var value = initial()
            change(&value)
            storage = Self.adding(key, value, to: &entries)
            return true
        case .large(var table):
            storage = .small([])
            defer { storage = .large(table) }
            if let index = table.index(forKey: key) {
                change(&table.values[index])
                return false
            }
            var value = initial()
            change(&value)
            table[key] = value
            return true
        }
    }

    /// Adds a view of `key`, which the caller knows is absent (checked in debug builds only): no scan of
    /// the views for it (`upsert` compares every key of a small set).
    public mutating func insertNew(_ key: ConvKey, _ value: UserConv) {
        assert(!contains(key), "a view of \(key) is already here")
        switch storage {
        case .small(var entries):
            storage = .small([])
            storage = Self.adding(key, value, to: &entries)
        case .large(var table):
            storage = .small([])
            table[key] = value
            storage = .large(table)
        }
    }

    /// The storage once an absent view is added to `entries` (taken out of `storage` by the caller, so the
    /// array is uniquely referenced while it grows): the array one entry longer, or a dictionary past
    /// `largeCount`.
    private static func adding(_ key: ConvKey, _ value: UserConv, to entries: inout [Entry]) -> Storage {
        guard entries.count < largeCount else {
            var table = [ConvKey: UserConv](minimumCapacity: entries.count + 1)
            for entry in entries { table[entry.key] = entry.value }
            table[key] = value
            return .large(table)
        }
        // One entry at a time (exact capacity): these arrays stay small, and doubling would leave up to
        // half of each unused.
        entries.reserveCapacity(entries.count + 1)
        entries.append(Entry(key: key, value: value))
        return .small(entries)
    }

    /// Removes the view of `key`; the removed view, if there was one.
    @discardableResult
    public mutating func removeValue(forKey key: ConvKey) -> UserConv? {
        switch storage {
        case .small(var entries):
            guard let index = entries.firstIndex(where: { $0.key == key }) else { return nil }
            storage = .small([])
            let removed = entries[index].value
            entries.swapAt(index, entries.count - 1)
            entries.removeLast()
            storage = .small(entries)
            return removed
        case .large(var table):
            storage = .small([])
            let removed = table.removeValue(forKey: key)
            if table.count <= Self.smallCount {
                var entries: [Entry] = []
                entries.reserveCapacity(table.count)
                for (key, value) in table { entries.append(Entry(key: key, value: value)) }
                storage = .small(entries)
            } else {
                storage = .large(table)
            }
            return removed
        }
    }

    /// Some view (the only one, for a store's record decoded alone).
    public var first: Element? {
        var iterator = makeIterator()
        return iterator.next()
    }

    /// The conversations, in no particular order.
    public var keys: [ConvKey] { map(\.key) }

    /// Calls `body` with every conversation's key (no array of them made).
    public func forEachKey(_ body: (ConvKey) -> Void) {
        switch storage {
        case .small(let entries): for entry in entries { body(entry.key) }
        case .large(let table): for key in table.keys { body(key) }
        }
    }

    /// Whether the views are held as a dictionary (for tests of the conversion).
    var isLarge: Bool {
        if case .large = storage { return true }
        return false
    }

    public struct Iterator: IteratorProtocol {
        fileprivate enum Base {
            case small(IndexingIterator<[Entry]>)
            case large(Dictionary<ConvKey, UserConv>.Iterator)
        }
        fileprivate var base: Base

        public mutating func next() -> Element? {
            switch base {
            case .small(var iterator):
                defer { base = .small(iterator) }
                return iterator.next().map { ($0.key, $0.value) }
            case .large(var iterator):
                defer { base = .large(iterator) }
                return iterator.next()
            }
        }
    }

    public func makeIterator() -> Iterator {
        switch storage {
        case .small(let entries): Iterator(base: .small(entries.makeIterator()))
        case .large(let table): Iterator(base: .large(table.makeIterator()))
        }
    }

    public static func == (a: UserConvs, b: UserConvs) -> Bool {
        a.count == b.count && a.allSatisfy { b[$0.key] == $0.value }
    }
}
