// swift-tools-version:6.0
// Tender: an Apple Pay merchant backend. Targets are split by dependency and trust:
// one systemLibrary per C library, one thin Swift module that alone imports it,
// a pure domain core, and one executable that wires everything.
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Tender",
    products: [
        .executable(name: "tender", targets: ["tender"]),
    ],
    targets: [
        // C libraries from Debian, each through pkg-config.
        .systemLibrary(name: "CLibPQ", path: "Sources/CLibPQ", pkgConfig: "libpq",
                       providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CMicroHTTPD", path: "Sources/CMicroHTTPD", pkgConfig: "libmicrohttpd",
                       providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
                       providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", pkgConfig: "libcurl",
                       providers: [.apt(["libcurl4-openssl-dev"])]),

        // Thin wrappers: the only modules that import a C library.
        .target(name: "Postgres", dependencies: ["CLibPQ"], swiftSettings: strict),
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD"], swiftSettings: strict),
        .target(name: "Crypto", dependencies: ["COpenSSL"], swiftSettings: strict),
        .target(name: "HTTPClient", dependencies: ["CCurl"], swiftSettings: strict),

        // Pure domain core: no I/O.
        .target(name: "Observability", swiftSettings: strict),
        .target(name: "Money", swiftSettings: strict),
        .target(name: "PaymentRequest", dependencies: ["Money"], swiftSettings: strict),
        .target(name: "ApplePayToken", dependencies: ["Crypto", "Money"], swiftSettings: strict),
        .target(name: "FinanceStore", dependencies: ["Money"], swiftSettings: strict),
        .target(name: "Reconciliation", dependencies: ["Money"], swiftSettings: strict),
        .target(name: "Payments", dependencies: ["Money"], swiftSettings: strict),

        // Shell: routes, auth, stores, configuration, CLI commands.
        .target(name: "TenderServer",
                dependencies: ["Postgres", "HTTPServer", "HTTPClient", "Crypto", "Money", "PaymentRequest",
                               "ApplePayToken", "Payments", "FinanceStore", "Reconciliation", "Observability"],
                swiftSettings: strict),
        .executableTarget(name: "tender", dependencies: ["TenderServer"], swiftSettings: strict),

        .testTarget(name: "MoneyTests", dependencies: ["Money"]),
        .testTarget(name: "PaymentRequestTests", dependencies: ["PaymentRequest", "Money"]),
        .testTarget(name: "CryptoTests", dependencies: ["Crypto"]),
        .testTarget(name: "ApplePayTokenTests", dependencies: ["ApplePayToken", "Crypto", "Money"], exclude: ["crashers"],
                    resources: [.copy("Vectors")]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres"]),
        .testTarget(name: "HTTPClientTests", dependencies: ["HTTPClient"]),
        .testTarget(name: "FinanceStoreTests", dependencies: ["FinanceStore", "Money"]),
        .testTarget(name: "ReconciliationTests", dependencies: ["Reconciliation", "Money"], resources: [.copy("Vectors")]),
        .testTarget(name: "PaymentsTests", dependencies: ["Payments", "Money"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer"]),
        .testTarget(name: "TenderServerTests",
                    dependencies: ["TenderServer", "Postgres", "HTTPServer", "HTTPClient", "Crypto", "Money",
                                   "PaymentRequest", "ApplePayToken", "Payments", "FinanceStore", "Reconciliation"],
                    exclude: ["Wallet/apns_server.py"]),
    ],
    swiftLanguageModes: [.v6]
)
