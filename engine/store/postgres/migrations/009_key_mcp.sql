-- The MCP tools a key may list and call: globs over "{server}/{tool}" (JSON array); none by default.
ALTER TABLE api_keys ADD COLUMN mcp TEXT NOT NULL DEFAULT '[]';
