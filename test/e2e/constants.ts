/** The stack's test merchant gets exactly this key, as DEV_API_KEY does for `npm start`. */
export const DEV_API_KEY = `sk_test_e2e${"0123456789".repeat(4)}`;
