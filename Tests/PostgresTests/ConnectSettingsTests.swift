import Testing
@testable import Postgres

/// libpq settings layered on the connection string (no server needed).
@Suite struct ConnectSettingsTests {
    private func pairs(_ url: String) throws -> [String: String] {
        let settings = try ConnectSettings.make(PostgresConfiguration(connectionString: url)).get()
        return Dictionary(zip(settings.keywords, settings.values), uniquingKeysWith: { _, last in last })
    }

    /// A database path that drops packets silently (the chaos test's nftables partition) ends a connection
    /// with a query in flight after the TCP user timeout, not after the kernel's retransmission limit.
    @Test func aSilentPeerEndsTheConnectionAfterTheTCPUserTimeout() throws {
        let settings = try pairs("postgresql://tender@127.0.0.1:5432/tender")
        #expect(settings["tcp_user_timeout"] == "10000")
        #expect(settings["keepalives"] == "1")
    }

    @Test func theConnectionStringKeepsItsOwnTCPUserTimeout() throws {
        let url = "postgresql://tender@127.0.0.1:5432/tender?tcp_user_timeout=2500"
        let settings = try pairs(url)
        #expect(settings["tcp_user_timeout"] == nil)
        #expect(settings["dbname"] == url)
    }
}
