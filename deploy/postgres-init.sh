#!/bin/sh
# Run once by the postgres image on an empty data directory (docker-entrypoint-initdb.d):
# the guardian's own role and database, which the api tier's role `pps` does not own.
# The api tier's database is POSTGRES_DB, created by the image itself.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v guardian_db="$PPS_GUARDIAN_DATABASE" -v guardian_password="$GUARDIAN_POSTGRES_PASSWORD" <<'SQL'
CREATE ROLE pps_guardian LOGIN PASSWORD :'guardian_password';
CREATE DATABASE :"guardian_db" OWNER pps_guardian;
REVOKE ALL ON DATABASE :"guardian_db" FROM PUBLIC;
SQL
