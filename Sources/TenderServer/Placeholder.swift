// TenderServer
