package redisledger

import "testing"

func TestSupported(t *testing.T) {
	for _, tc := range []struct {
		info    string
		version string
		ok      bool
	}{
		{"# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n", "7.0.15", true},
		{"# Server\r\nredis_version:8.2.1\r\n", "8.2.1", true},
		{"redis_version:10.0.0", "10.0.0", true},
		{"# Server\r\nredis_version:6.2.14\r\n", "6.2.14", false},
		{"# Server\r\nredis_version:5.0.7\r\n", "5.0.7", false},
		{"# Server\r\nredis_version:x.y\r\n", "x.y", false},
		{"# Server\r\nredis_mode:standalone\r\n", "", false},
		{"", "", false},
	} {
		v, ok := supported(tc.info)
		if v != tc.version || ok != tc.ok {
			t.Errorf("supported(%q) = %q, %v; want %q, %v", tc.info, v, ok, tc.version, tc.ok)
		}
	}
}
