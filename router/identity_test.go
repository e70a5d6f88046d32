package router

import "testing"

func TestParseIdentity(t *testing.T) {
	id, ok := parseIdentity("# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:0\r\nredis_mode:cluster\r\nos:Linux\r\n")
	if !ok || id.version != "7.0.15" || id.mode != "cluster" {
		t.Fatalf("parseIdentity = %+v %v", id, ok)
	}
	if _, ok := parseIdentity("# Server\r\nredis_version:7.0.15\r\n"); ok {
		t.Fatal("an INFO without redis_mode was taken")
	}
}
