// PemKey KEYSTORE PASSWORD ALIAS prints the private key of ALIAS in the PKCS12 KEYSTORE as
// PKCS#8 PEM: keytool exports certificates but not keys, and the Go clients read PEM.
// kafka.sh runs it as a single-file program (java PemKey.java ...), so nothing is built.
import java.io.FileInputStream;
import java.security.Key;
import java.security.KeyStore;
import java.util.Base64;

public class PemKey {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: java PemKey.java KEYSTORE PASSWORD ALIAS");
            System.exit(2);
        }
        char[] password = args[1].toCharArray();
        KeyStore ks = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(args[0])) {
            ks.load(in, password);
        }
        Key key = ks.getKey(args[2], password);
        if (key == null) {
            System.err.println("PemKey: no key " + args[2] + " in " + args[0]);
            System.exit(1);
        }
        System.out.println("-----BEGIN PRIVATE KEY-----");
        System.out.println(Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(key.getEncoded()));
        System.out.println("-----END PRIVATE KEY-----");
    }
}
