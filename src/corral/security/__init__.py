"""Security: who a connection is (TLS, SASL), what it may do (ACLs), and the state both keep."""
