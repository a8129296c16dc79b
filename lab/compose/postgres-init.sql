-- The lab's PostgreSQL role (docker-compose.yml, profile lab): an ordinary login role, not the
-- superuser. It is converge's migration role (docs/security.md): each lab environment creates
-- its own schema, migrates it and owns it, which needs CREATE on this database and nothing more.
-- The password is a fixed demo value for this isolated network only; never reuse it.
CREATE ROLE converge_lab LOGIN PASSWORD 'lab-demo-password' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
GRANT CONNECT, CREATE ON DATABASE lab TO converge_lab;
