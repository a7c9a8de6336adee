/// Bearer-token checks. The token is compared in constant time (every byte of the longer of the two is
/// looked at whatever differs) and is never logged, counted or echoed.
struct BearerAuth: Sendable {
    let token: [UInt8]

    init(_ token: String) { self.token = Array(token.utf8) }

    /// Whether an `Authorization` header value carries the token.
    func allows(_ header: String?) -> Bool {
        guard let header, header.utf8.count > 7 else { return false }
        let scheme = header.prefix(7)
        guard scheme.lowercased() == "bearer " else { return false }
        return Self.constantTimeEquals(Array(header.utf8.dropFirst(7)), token)
    }

    static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) {
            difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return difference == 0
    }
}
