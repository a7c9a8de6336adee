/// A small, fast, seeded random generator (SplitMix64): the same seed gives the same workload everywhere.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// A Zipf-like size in `1...max` (exponent 1): many small, a few huge.
    public mutating func zipf(max: Int) -> Int {
        let u = Double.random(in: 0..<1, using: &self)
        // Inverse CDF of the continuous 1/x distribution on [1, max+1).
        let x = exp(u * log(Double(max) + 1))
        return Swift.min(max, Swift.max(1, Int(x)))
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
