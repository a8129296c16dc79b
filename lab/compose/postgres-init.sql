-- The lab's PostgreSQL roles (docker-compose.yml, profile lab): ordinary login roles, none of them
-- the superuser. converge_lab is converge's migration role (docs/security.md): each lab environment
-- creates its own schema, migrates and owns it (CREATE on this database, nothing more), and then
-- runs `converge grants` (grantsSql) for the three runtime roles on that schema: the relays
-- connect as converge_lab_relay, the consumers as converge_lab_consumer, the service's writes as
-- converge_lab_producer. The password is a fixed demo value for this isolated network only.
CREATE ROLE converge_lab LOGIN PASSWORD 'lab-demo-password' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
CREATE ROLE converge_lab_relay LOGIN PASSWORD 'lab-demo-password' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
CREATE ROLE converge_lab_consumer LOGIN PASSWORD 'lab-demo-password' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
CREATE ROLE converge_lab_producer LOGIN PASSWORD 'lab-demo-password' NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION;
GRANT CONNECT, CREATE ON DATABASE lab TO converge_lab;
GRANT CONNECT ON DATABASE lab TO converge_lab_relay, converge_lab_consumer, converge_lab_producer;
