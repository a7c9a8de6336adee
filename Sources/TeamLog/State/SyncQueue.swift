/// Members-sync deadlines as a min-heap with lazy invalidation: an entry is pushed whenever a channel
/// member's deadline may have started (they joined, or their last device went offline) and checked
/// against the state when it reaches the top, so no change ever scans all channels.
///
/// Derived state: rebuilt from channels and presence after a restore, never stored.
struct SyncQueue: Sendable {
    struct Entry: Sendable {
        var deadline: Int64
        var channel: Id
        var user: Id
    }

    private var heap: [Entry] = []

    var isEmpty: Bool { heap.isEmpty }
    /// Every entry, in heap order (for invariant checks).
    var entries: [Entry] { heap }
    var top: Entry? { heap.first }

    mutating func removeAll() { heap.removeAll(keepingCapacity: true) }

    mutating func push(_ e: Entry) {
        heap.append(e)
        var i = heap.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.less(heap[i], heap[parent]) else { break }
            heap.swapAt(i, parent)
            i = parent
        }
    }

    @discardableResult
    mutating func pop() -> Entry? {
        guard !heap.isEmpty else { return nil }
        heap.swapAt(0, heap.count - 1)
        let e = heap.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1
            let r = l + 1
            var m = i
            if l < heap.count && Self.less(heap[l], heap[m]) { m = l }
            if r < heap.count && Self.less(heap[r], heap[m]) { m = r }
            if m == i { break }
            heap.swapAt(i, m)
            i = m
        }
        return e
    }

    /// Orders by deadline, then channel and user, so equal deadlines pop in one fixed order.
    private static func less(_ a: Entry, _ b: Entry) -> Bool {
        (a.deadline, a.channel, a.user) < (b.deadline, b.channel, b.user)
    }
}
