# The service image: every role (api, gateway, dispatcher) from one build; ROLES picks.
FROM node:20-bookworm-slim AS build
WORKDIR /app
# patches/ before `npm ci`: its postinstall (patch-package) patches postgres.js
# from there; without it the image would run the unpatched driver.
COPY package.json package-lock.json ./
COPY patches ./patches
RUN npm ci --no-audit --no-fund \
 && grep -q 'return closedWrite()' node_modules/postgres/src/connection.js node_modules/postgres/cjs/src/connection.js
COPY . .
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/migrations ./migrations
COPY --from=build /app/package.json ./package.json
USER node
# API, gateway, metrics listener (METRICS_PORT, when set)
EXPOSE 8080 8081 9464
CMD ["node", "dist/src/main.js"]
