-- Runs once, when the PostgreSQL volume is initialised: the provisioner uses
-- the database POSTGRES_DB (provisioner), the control plane its own.
CREATE DATABASE controlplane;
