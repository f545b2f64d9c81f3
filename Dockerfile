# One image for every node of the distributed deployment (docker-compose.yml): the api
# server, the guardian and the contracts' deployment step; the command chooses which (the
# TLS balancer is HAProxy's official image). The packages run as TypeScript through Node's type stripping, so the
# server needs no build step: the first stage installs the production dependencies only,
# the second builds the dashboard page, the last copies both with the sources and runs as
# the unprivileged `node` user.

# Node 24.21.0 and pnpm 10.34.9: the versions scripts/toolchain.sh pins for development.
FROM node:24.21.0-bookworm-slim AS dependencies
WORKDIR /app
RUN npm install --global --no-audit --no-fund pnpm@10.34.9
COPY pnpm-workspace.yaml pnpm-lock.yaml package.json ./
COPY patches ./patches
COPY packages ./packages
# --prod: no devDependencies (vitest, typescript, solc, ...); the lockfile is followed exactly.
# The store stays inside the stage (pnpm-workspace.yaml points it at .toolchain/).
RUN pnpm install --frozen-lockfile --prod --config.confirmModulesPurge=false \
  && rm -rf .toolchain

# The dashboard page (packages/dashboard, D41) is the one thing built: Vite and React are
# devDependencies, so it is built here and only its static files go to the image.
FROM node:24.21.0-bookworm-slim AS dashboard
WORKDIR /app
RUN npm install --global --no-audit --no-fund pnpm@10.34.9
COPY pnpm-workspace.yaml pnpm-lock.yaml package.json ./
COPY patches ./patches
COPY packages ./packages
RUN pnpm install --frozen-lockfile --filter "@pps/dashboard..." --config.confirmModulesPurge=false \
  && pnpm --filter @pps/dashboard build

FROM node:24.21.0-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=dependencies --chown=root:root /app /app
COPY --from=dashboard --chown=root:root /app/packages/dashboard/dist /app/packages/dashboard/dist
# The api nodes' data directory (server.lock, admin.json); a volume in compose.
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 8080 8081 8090 8443
# docker-compose.yml gives each service its command; alone, the image is an api node.
CMD ["node", "--disable-warning=ExperimentalWarning", "packages/server/src/main.ts"]
