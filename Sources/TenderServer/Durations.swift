/// Elapsed time as seconds, for timings in logs and benchmark figures (never money).
extension Duration {
    var secondsValue: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
